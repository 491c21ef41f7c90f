//! Validation of the program the user asks mcheck to check.
//!
//! [`resolve_program`] finds the file the way `execvp` would, and [`check_program`]
//! refuses anything that is not an x86-64 ELF executable, or a `#!` script whose
//! interpreter is one, with a clear one-line message.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::unistd::{access, AccessFlags};

use super::elf::ElfFile;

/// Why the program given by the user cannot be checked.
#[derive(thiserror::Error, Debug)]
pub enum BadInput {
    /// The path does not exist, or the bare name is not in `$PATH`.
    #[error("{}: no such file or command (not found{})", path.display(), if path.components().count() > 1 { "" } else { " in $PATH" })]
    NotFound {
        /// The path or name as given.
        path: PathBuf,
    },
    /// The path exists but is not a regular file.
    #[error("{}: is {what}, not a program", path.display())]
    NotAFile {
        /// The offending path.
        path: PathBuf,
        /// What it is instead, e.g. "a directory".
        what: &'static str,
    },
    /// The file has no execute permission.
    #[error("{}: not executable (no execute permission; try `chmod +x`)", path.display())]
    NotExecutable {
        /// The offending path.
        path: PathBuf,
    },
    /// The file is a `#!` script whose interpreter cannot be checked.
    #[error("{}: a script whose interpreter (#!{interpreter}) cannot be run: {why}", path.display())]
    Script {
        /// The offending path.
        path: PathBuf,
        /// The interpreter line after `#!`, trimmed.
        interpreter: String,
        /// What is wrong with the interpreter.
        why: Box<BadInput>,
    },
    /// The file is not an ELF file at all.
    #[error("{}: not an ELF binary: mcheck checks x86-64 ELF executables", path.display())]
    NotElf {
        /// The offending path.
        path: PathBuf,
    },
    /// The file is a 32-bit ELF.
    #[error("{}: 32-bit ELF: mcheck checks x86-64 binaries", path.display())]
    Elf32 {
        /// The offending path.
        path: PathBuf,
    },
    /// The file is a 64-bit ELF for another machine.
    #[error("{}: ELF binary for {machine}: mcheck checks x86-64 binaries", path.display())]
    ForeignArch {
        /// The offending path.
        path: PathBuf,
        /// The machine name, e.g. "AArch64".
        machine: String,
    },
    /// The file is an ELF file that cannot be run (relocatable object, core dump, library).
    #[error("{}: {what}, not an executable program", path.display())]
    NotExecutableElf {
        /// The offending path.
        path: PathBuf,
        /// What it is, e.g. "a relocatable object file (.o)".
        what: &'static str,
    },
    /// The ELF header looks right but the file cannot be parsed.
    #[error("{}: malformed ELF file: {reason}", path.display())]
    Malformed {
        /// The offending path.
        path: PathBuf,
        /// The parser's complaint.
        reason: String,
    },
    /// The file cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Unreadable {
        /// The offending path.
        path: PathBuf,
        /// The underlying I/O error.
        source: io::Error,
    },
}

/// What kind of valid program was found (for a script, its interpreter's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgramKind {
    /// No `PT_INTERP`: the program does not go through the dynamic loader.
    pub is_static: bool,
    /// Position-independent executable (`ET_DYN`), loaded at a bias.
    pub is_pie: bool,
}

/// Finds the program to run: a name without `/` is searched in `$PATH` like `execvp`
/// does; the result is canonicalized.
pub fn resolve_program(name: &OsStr) -> Result<PathBuf, BadInput> {
    if name.is_empty() {
        return Err(BadInput::NotFound {
            path: PathBuf::from(name),
        });
    }
    let candidate = if name.as_bytes().contains(&b'/') {
        PathBuf::from(name)
    } else {
        search_path(name).ok_or_else(|| BadInput::NotFound {
            path: PathBuf::from(name),
        })?
    };
    candidate
        .canonicalize()
        .map_err(|e| io_error(&candidate, e))
}

/// Searches `$PATH` (default `/usr/local/bin:/usr/bin:/bin`) for `name`: the first
/// executable regular file wins, else the first existing regular file (so that the
/// caller then reports the missing execute permission).
fn search_path(name: &OsStr) -> Option<PathBuf> {
    let path_var =
        std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    let mut first_found = None;
    for dir in path_var.as_bytes().split(|&b| b == b':') {
        let dir = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(OsStr::from_bytes(dir))
        };
        let candidate = dir.join(name);
        if !candidate.is_file() {
            continue;
        }
        if access(&candidate, AccessFlags::X_OK).is_ok() {
            return Some(candidate);
        }
        first_found.get_or_insert(candidate);
    }
    first_found
}

/// Maps an I/O error on `path` to `NotFound` or `Unreadable`.
fn io_error(path: &Path, e: io::Error) -> BadInput {
    if e.kind() == io::ErrorKind::NotFound {
        BadInput::NotFound {
            path: path.to_path_buf(),
        }
    } else {
        BadInput::Unreadable {
            path: path.to_path_buf(),
            source: e,
        }
    }
}

/// Checks that `path` is an executable x86-64 ELF program, or a `#!` script the kernel
/// runs with one (mcheck then checks the interpreter, and whatever the script runs: see
/// the process tree), and says whether it is static and/or position-independent.
pub fn check_program(path: &Path) -> Result<ProgramKind, BadInput> {
    check_program_within(path, 0)
}

/// Interpreters of interpreters the kernel follows (`BINPRM_MAX_RECURSION`).
const MAX_INTERPRETERS: usize = 4;

fn check_program_within(path: &Path, depth: usize) -> Result<ProgramKind, BadInput> {
    let meta = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Err(BadInput::NotAFile {
            path: path.to_path_buf(),
            what,
        });
    }
    if access(path, AccessFlags::X_OK).is_err() {
        return Err(BadInput::NotExecutable {
            path: path.to_path_buf(),
        });
    }
    let head = read_head(path).map_err(|e| io_error(path, e))?;
    if let Some(interpreter) = interpreter_line(&head) {
        let why = match interpreter.split_whitespace().next() {
            None => BadInput::NotFound {
                path: PathBuf::from("(none)"),
            },
            Some(_) if depth >= MAX_INTERPRETERS => BadInput::NotElf {
                path: path.to_path_buf(),
            },
            Some(first) => match check_program_within(Path::new(first), depth + 1) {
                Ok(kind) => return Ok(kind),
                Err(e) => e,
            },
        };
        return Err(BadInput::Script {
            path: path.to_path_buf(),
            interpreter,
            why: Box::new(why),
        });
    }
    check_header(path, &head)?;
    let elf = ElfFile::load(path).map_err(|e| BadInput::Malformed {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let is_pie = elf.is_pie();
    let is_static = elf.is_static();
    if is_pie && is_static && !elf.is_static_pie() {
        return Err(BadInput::NotExecutableElf {
            path: path.to_path_buf(),
            what: "a shared library",
        });
    }
    Ok(ProgramKind { is_static, is_pie })
}

/// Reads up to the first 128 bytes of the file.
fn read_head(path: &Path) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(128);
    File::open(path)?.take(128).read_to_end(&mut head)?;
    Ok(head)
}

/// Whether `path` is a `#!` script (false when it cannot be read).
pub fn is_script(path: &Path) -> bool {
    read_head(path).is_ok_and(|head| head.starts_with(b"#!"))
}

/// The interpreter line of a `#!` script (after `#!`, trimmed).
fn interpreter_line(head: &[u8]) -> Option<String> {
    let rest = head.strip_prefix(b"#!")?;
    let line = rest.split(|&b| b == b'\n').next().unwrap_or_default();
    Some(String::from_utf8_lossy(line).trim().to_string())
}

/// Classifies the file from its first bytes: non-ELF, wrong class/machine/type.
fn check_header(path: &Path, head: &[u8]) -> Result<(), BadInput> {
    let path = path.to_path_buf();
    if head.len() < 20 || &head[..4] != b"\x7fELF" {
        return Err(BadInput::NotElf { path });
    }
    match head[4] {
        1 => return Err(BadInput::Elf32 { path }),
        2 => {}
        _ => return Err(BadInput::NotElf { path }),
    }
    let big_endian = head[5] == 2;
    let read_u16 = |at: usize| {
        let bytes = [head[at], head[at + 1]];
        if big_endian {
            u16::from_be_bytes(bytes)
        } else {
            u16::from_le_bytes(bytes)
        }
    };
    let e_type = read_u16(16);
    let e_machine = read_u16(18);
    if e_machine != 62 || big_endian {
        return Err(BadInput::ForeignArch {
            path,
            machine: machine_name(e_machine),
        });
    }
    let what = match e_type {
        2 | 3 => return Ok(()),
        1 => "a relocatable object file (.o)",
        4 => "a core dump",
        _ => "an ELF file of unknown type",
    };
    Err(BadInput::NotExecutableElf { path, what })
}

/// A human name for an ELF `e_machine` value.
fn machine_name(e_machine: u16) -> String {
    let name = match e_machine {
        2 => "SPARC",
        3 => "i386",
        8 => "MIPS",
        20 => "PowerPC",
        21 => "PowerPC64",
        22 => "S/390",
        40 => "ARM",
        43 => "SPARC64",
        50 => "IA-64",
        62 => "x86-64",
        183 => "AArch64",
        243 => "RISC-V",
        258 => "LoongArch",
        other => return format!("machine {other}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn temp_dir() -> PathBuf {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mcheck-input-check-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write_file(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    fn elf_header(class: u8, e_type: u16, machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = class;
        h[5] = 1;
        h[6] = 1;
        h[16..18].copy_from_slice(&e_type.to_le_bytes());
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h
    }

    #[test]
    fn valid_program() {
        let path = resolve_program(OsStr::new("true")).unwrap();
        assert!(path.is_absolute());
        let kind = check_program(&path).unwrap();
        assert!(!kind.is_static);
        let kind = check_program(Path::new("/bin/true")).unwrap();
        assert!(kind.is_pie);
    }

    #[test]
    fn not_found() {
        let e = resolve_program(OsStr::new("no-such-command-mcheck")).unwrap_err();
        assert!(matches!(e, BadInput::NotFound { .. }), "{e}");
        assert!(e.to_string().contains("$PATH"));
        let e = resolve_program(OsStr::new("/no/such/file")).unwrap_err();
        assert!(matches!(e, BadInput::NotFound { .. }), "{e}");
        let e = check_program(Path::new("/no/such/file")).unwrap_err();
        assert!(matches!(e, BadInput::NotFound { .. }), "{e}");
    }

    #[test]
    fn rejects_bad_inputs() {
        let dir = temp_dir();
        let script = write_file(&dir, "s.sh", b"#!/bin/sh\necho hi\n", 0o755);
        // A script is run by its interpreter, which is what gets checked.
        let sh = check_program(Path::new("/bin/sh")).unwrap();
        assert_eq!(check_program(&script).unwrap(), sh);
        let nested = write_file(
            &dir,
            "n.sh",
            format!("#!{}\n", script.display()).as_bytes(),
            0o755,
        );
        assert_eq!(check_program(&nested).unwrap(), sh);
        let lost = write_file(&dir, "l.sh", b"#!/no/such/shell -e\necho hi\n", 0o755);
        let e = check_program(&lost).unwrap_err();
        assert!(matches!(e, BadInput::Script { .. }), "{e}");
        assert!(e.to_string().contains("/no/such/shell"), "{e}");
        let text_interp = write_file(
            &dir,
            "i.sh",
            format!("#!{}\n", dir.join("t.txt").display()).as_bytes(),
            0o755,
        );

        let text = write_file(&dir, "t.txt", b"hello world, this is not elf\n", 0o755);
        let e = check_program(&text).unwrap_err();
        assert!(matches!(e, BadInput::NotElf { .. }), "{e}");
        let e = check_program(&text_interp).unwrap_err();
        assert!(e.to_string().contains("not an ELF binary"), "{e}");

        let empty = write_file(&dir, "empty", b"", 0o755);
        let e = check_program(&empty).unwrap_err();
        assert!(matches!(e, BadInput::NotElf { .. }), "{e}");

        let e = check_program(&dir).unwrap_err();
        assert!(matches!(e, BadInput::NotAFile { .. }), "{e}");
        assert!(e.to_string().contains("directory"));

        let true_bytes = std::fs::read("/bin/true").unwrap();
        let noexec = write_file(&dir, "true-noexec", &true_bytes, 0o644);
        let e = check_program(&noexec).unwrap_err();
        assert!(matches!(e, BadInput::NotExecutable { .. }), "{e}");

        let elf32 = write_file(&dir, "elf32", &elf_header(1, 2, 3), 0o755);
        let e = check_program(&elf32).unwrap_err();
        assert!(matches!(e, BadInput::Elf32 { .. }), "{e}");
        assert!(e.to_string().contains("32-bit ELF"));

        let arm = write_file(&dir, "arm", &elf_header(2, 2, 183), 0o755);
        let e = check_program(&arm).unwrap_err();
        assert!(matches!(e, BadInput::ForeignArch { .. }), "{e}");
        assert!(e.to_string().contains("AArch64"));

        let obj = write_file(&dir, "x.o", &elf_header(2, 1, 62), 0o755);
        let e = check_program(&obj).unwrap_err();
        assert!(matches!(e, BadInput::NotExecutableElf { .. }), "{e}");
        assert!(e.to_string().contains("relocatable"));

        let core = write_file(&dir, "core", &elf_header(2, 4, 62), 0o755);
        let e = check_program(&core).unwrap_err();
        assert!(matches!(e, BadInput::NotExecutableElf { .. }), "{e}");

        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn static_programs() {
        let dir = temp_dir();
        let src = write_file(&dir, "m.c", b"int main(void) { return 0; }\n", 0o644);
        for (flag, want) in [
            (
                "-static",
                ProgramKind {
                    is_static: true,
                    is_pie: false,
                },
            ),
            (
                "-static-pie",
                ProgramKind {
                    is_static: true,
                    is_pie: true,
                },
            ),
        ] {
            let exe = dir.join(flag.trim_start_matches('-'));
            let ok = std::process::Command::new("gcc")
                .arg(flag)
                .arg(&src)
                .arg("-o")
                .arg(&exe)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("gcc {flag} not available; skipping");
                continue;
            }
            assert_eq!(check_program(&exe).unwrap(), want, "{flag}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rejects_shared_library_without_interpreter() {
        let dir = temp_dir();
        let src = write_file(&dir, "l.c", b"int f(void) { return 1; }\n", 0o644);
        let lib = dir.join("libl.so");
        let ok = std::process::Command::new("gcc")
            .args(["-shared", "-fPIC"])
            .arg(&src)
            .arg("-o")
            .arg(&lib)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            let e = check_program(&lib).unwrap_err();
            assert!(matches!(e, BadInput::NotExecutableElf { .. }), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_message_names_the_path() {
        let e = BadInput::Elf32 {
            path: PathBuf::from("/x/y"),
        };
        assert!(e.to_string().starts_with("/x/y: "));
    }
}
