//! Bad usage and bad input: `mcheck` must exit with status 2, explain the problem
//! in exactly one non-empty line on stderr, and never panic.
//!
//! None of these tests needs the fixtures: the inputs are made up in a fresh
//! temporary directory per test.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

const RUN_LIMIT: Duration = Duration::from_secs(60);

/// A fresh, empty directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("mcheck-badinput-{}-{n}-{tag}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs mcheck with `args`, output captured through files, killed after RUN_LIMIT.
fn run(tmp: &TempDir, args: &[&str]) -> Outcome {
    let out_path = tmp.path().join("mcheck.stdout");
    let err_path = tmp.path().join("mcheck.stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcheck"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .expect("spawn mcheck");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for mcheck") {
            break s;
        }
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "mcheck {args:?} did not finish within {}s",
                RUN_LIMIT.as_secs()
            );
        }
        thread::sleep(Duration::from_millis(10));
    };
    let read = |p: &Path| String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned();
    Outcome {
        code: status.code(),
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

fn assert_no_panic(what: &str, o: &Outcome) {
    assert!(
        !o.stderr.contains("panicked") && !o.stdout.contains("panicked"),
        "{what}: mcheck panicked:\nstderr:\n{}\nstdout:\n{}",
        o.stderr,
        o.stdout
    );
}

/// Status 2, no panic, exactly one non-empty line on stderr.
fn assert_rejected(what: &str, o: &Outcome) {
    assert_no_panic(what, o);
    assert_eq!(
        o.code,
        Some(2),
        "{what}: expected exit status 2, got {:?}\nstderr:\n{}\nstdout:\n{}",
        o.code,
        o.stderr,
        o.stdout
    );
    let lines: Vec<&str> = o.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "{what}: expected exactly one non-empty line on stderr, got {}:\n{}",
        lines.len(),
        o.stderr
    );
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) {
    let mut f = File::create(path).unwrap();
    f.write_all(bytes).unwrap();
    drop(f);
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A minimal ELF32 little-endian i386 executable header (52 bytes, no segments).
fn elf32_header() -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&[
        0x7f, b'E', b'L', b'F', 1, /* ELFCLASS32 */
        1, /* LSB */
        1, 0,
    ]);
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&2u16.to_le_bytes()); // e_type ET_EXEC
    h.extend_from_slice(&3u16.to_le_bytes()); // e_machine EM_386
    h.extend_from_slice(&1u32.to_le_bytes()); // e_version
    h.extend_from_slice(&0x0804_8000u32.to_le_bytes()); // e_entry
    h.extend_from_slice(&0u32.to_le_bytes()); // e_phoff
    h.extend_from_slice(&0u32.to_le_bytes()); // e_shoff
    h.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    h.extend_from_slice(&52u16.to_le_bytes()); // e_ehsize
    h.extend_from_slice(&32u16.to_le_bytes()); // e_phentsize
    h.extend_from_slice(&0u16.to_le_bytes()); // e_phnum
    h.extend_from_slice(&40u16.to_le_bytes()); // e_shentsize
    h.extend_from_slice(&0u16.to_le_bytes()); // e_shnum
    h.extend_from_slice(&0u16.to_le_bytes()); // e_shstrndx
    assert_eq!(h.len(), 52);
    h
}

/// A minimal ELF64 little-endian executable header for `machine` (64 bytes, no segments).
fn elf64_header(machine: u16) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&[
        0x7f, b'E', b'L', b'F', 2, /* ELFCLASS64 */
        1, /* LSB */
        1, 0,
    ]);
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&2u16.to_le_bytes()); // e_type ET_EXEC
    h.extend_from_slice(&machine.to_le_bytes()); // e_machine
    h.extend_from_slice(&1u32.to_le_bytes()); // e_version
    h.extend_from_slice(&0x40_0000u64.to_le_bytes()); // e_entry
    h.extend_from_slice(&0u64.to_le_bytes()); // e_phoff
    h.extend_from_slice(&0u64.to_le_bytes()); // e_shoff
    h.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    h.extend_from_slice(&64u16.to_le_bytes()); // e_ehsize
    h.extend_from_slice(&56u16.to_le_bytes()); // e_phentsize
    h.extend_from_slice(&0u16.to_le_bytes()); // e_phnum
    h.extend_from_slice(&64u16.to_le_bytes()); // e_shentsize
    h.extend_from_slice(&0u16.to_le_bytes()); // e_shnum
    h.extend_from_slice(&0u16.to_le_bytes()); // e_shstrndx
    assert_eq!(h.len(), 64);
    h
}

fn check_program(tag: &str, what: &str, make: impl FnOnce(&Path) -> PathBuf) {
    let tmp = TempDir::new(tag);
    let program = make(tmp.path());
    let program = program.to_str().unwrap().to_string();
    let o = run(&tmp, &["--", &program]);
    assert_rejected(what, &o);
}

#[test]
fn missing_file() {
    check_program("missing", "missing program file", |d| {
        d.join("does-not-exist")
    });
}

#[test]
fn directory() {
    check_program("dir", "program is a directory", |d| {
        let p = d.join("a-directory");
        fs::create_dir(&p).unwrap();
        p
    });
}

#[test]
fn not_executable() {
    check_program("noexec", "program without execute permission", |d| {
        // A genuine x86-64 ELF, only the mode is wrong.
        let p = d.join("true-copy");
        let bytes = fs::read("/bin/true").expect("read /bin/true");
        write_file(&p, &bytes, 0o644);
        p
    });
}

#[test]
fn executable_text_file() {
    check_program("text", "executable text file that is not ELF", |d| {
        let p = d.join("notes.txt");
        write_file(&p, b"this is not a program\njust some text\n", 0o755);
        p
    });
}

#[test]
fn elf32() {
    check_program("elf32", "32-bit ELF", |d| {
        let p = d.join("elf32");
        write_file(&p, &elf32_header(), 0o755);
        p
    });
}

#[test]
fn foreign_arch_elf() {
    check_program("aarch64", "AArch64 ELF", |d| {
        let p = d.join("elf-aarch64");
        write_file(&p, &elf64_header(183 /* EM_AARCH64 */), 0o755);
        p
    });
}

/// A script is run by its interpreter (and checked as a process tree, see
/// tests/it/process_tree.rs); one whose interpreter does not exist, or is not an x86-64 ELF
/// program, is refused before it runs.
#[test]
fn script_with_a_bad_interpreter() {
    let tmp = TempDir::new("script");
    let marker = tmp.path().join("script-ran");
    let text = tmp.path().join("not-a-shell.txt");
    write_file(&text, b"just some text, not a program\n", 0o755);
    for interpreter in ["/no/such/shell -e", text.to_str().unwrap()] {
        let script = tmp.path().join("script.sh");
        write_file(
            &script,
            format!("#!{interpreter}\ntouch '{}'\nexit 0\n", marker.display()).as_bytes(),
            0o755,
        );
        let o = run(&tmp, &["--", script.to_str().unwrap()]);
        assert_rejected(&format!("#!{interpreter} script"), &o);
        let first = interpreter.split(' ').next().unwrap();
        assert!(
            o.stderr.contains(first),
            "the interpreter is named: {}",
            o.stderr
        );
        assert!(!marker.exists(), "the rejected script was executed anyway");
    }
}

#[test]
fn double_dash_without_program() {
    let tmp = TempDir::new("dashdash");
    let o = run(&tmp, &["--"]);
    assert_no_panic("mcheck --", &o);
    assert_eq!(
        o.code,
        Some(2),
        "mcheck --: expected exit status 2, got {:?}\nstderr:\n{}",
        o.code,
        o.stderr
    );
}

#[test]
fn no_arguments() {
    let tmp = TempDir::new("noargs");
    let o = run(&tmp, &[]);
    assert_no_panic("mcheck (no arguments)", &o);
    assert_eq!(
        o.code,
        Some(2),
        "mcheck: expected exit status 2, got {:?}\nstderr:\n{}",
        o.code,
        o.stderr
    );
}

#[test]
fn unknown_option() {
    let tmp = TempDir::new("badopt");
    let o = run(&tmp, &["--no-such-option-xyz", "--", "/bin/true"]);
    assert_no_panic("unknown option", &o);
    assert_eq!(
        o.code,
        Some(2),
        "unknown option: expected exit status 2, got {:?}\nstderr:\n{}",
        o.code,
        o.stderr
    );
}

#[test]
fn bad_pct_depth() {
    let tmp = TempDir::new("pct-depth");
    for depth in ["0", "2..5", "1..", "deep"] {
        let o = run(
            &tmp,
            &["--strategy", "pct", "--pct-depth", depth, "--", "/bin/true"],
        );
        // A usage error (clap's: the error line and a hint to --help), not bad input.
        let what = format!("--pct-depth {depth}");
        assert_no_panic(&what, &o);
        assert_eq!(o.code, Some(2), "{what}: {}", o.stderr);
        assert!(o.stderr.contains("--pct-depth"), "{what}: {}", o.stderr);
    }
}
