//! The runtime module map: which ELF file is mapped where, parsed from `/proc/PID/maps`.
//!
//! For each module, `bias = avma - svma`, computed from its lowest-offset file mapping
//! and the `PT_LOAD` segment covering that offset (for the usual mapping at file offset 0
//! this is `start - first_load_vaddr`).

use std::io::Read;
use std::path::{Path, PathBuf};

use super::elf::ElfFile;

/// One ELF file mapped into the traced process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedModule {
    /// The file's path as shown in the maps file.
    pub path: PathBuf,
    /// The lowest avma of any of its mappings.
    pub start: u64,
    /// One past the highest avma of any of its mappings.
    pub end: u64,
    /// `avma - svma` for this module.
    pub bias: u64,
}

impl MappedModule {
    /// Converts a runtime address in this module to the address in the file.
    pub fn to_svma(&self, avma: u64) -> u64 {
        avma.wrapping_sub(self.bias)
    }

    /// Converts an address in the file to the runtime address.
    pub fn to_avma(&self, svma: u64) -> u64 {
        svma.wrapping_add(self.bias)
    }

    /// True when `avma` lies within `start..end`.
    pub fn contains(&self, avma: u64) -> bool {
        (self.start..self.end).contains(&avma)
    }
}

/// The ELF modules of a process, sorted by start address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleMap {
    modules: Vec<MappedModule>,
}

/// One line of a maps file that names a file.
struct MapLine<'a> {
    start: u64,
    end: u64,
    offset: u64,
    path: &'a str,
}

/// Parses one line of `/proc/PID/maps`; `None` for anonymous or pseudo mappings.
fn parse_line(line: &str) -> Option<MapLine<'_>> {
    let mut rest = line;
    let mut fields = [""; 5];
    for field in &mut fields {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        *field = &rest[..end];
        rest = &rest[end..];
    }
    let path = rest.trim();
    if !path.starts_with('/') || path.ends_with(" (deleted)") {
        return None;
    }
    let (start, end) = fields[0].split_once('-')?;
    Some(MapLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        offset: u64::from_str_radix(fields[2], 16).ok()?,
        path,
    })
}

/// True when the file starts with the ELF magic.
fn looks_like_elf(path: &Path) -> bool {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"\x7fELF"
}

impl ModuleMap {
    /// Builds the map from the text of `/proc/PID/maps`. Only file-backed mappings of ELF
    /// files with an absolute path are kept; `[vdso]`, `[stack]`, anonymous memory, deleted
    /// files and non-ELF files are skipped. Consecutive mappings of the same file form one
    /// module; a new mapping at file offset 0 starts a new module.
    pub fn parse(proc_maps_text: &str) -> ModuleMap {
        let mut groups: Vec<(String, Vec<MapLine<'_>>)> = Vec::new();
        for line in proc_maps_text.lines().filter_map(parse_line) {
            match groups.last_mut() {
                Some((path, lines)) if path == line.path && line.offset != 0 => lines.push(line),
                _ => groups.push((line.path.to_string(), vec![line])),
            }
        }
        let mut modules: Vec<MappedModule> = groups
            .into_iter()
            .filter_map(|(path, lines)| module_from(PathBuf::from(path), &lines))
            .collect();
        modules.sort_by_key(|m| m.start);
        ModuleMap { modules }
    }

    /// Reads and parses `/proc/<pid>/maps`.
    pub fn read(pid: i32) -> std::io::Result<ModuleMap> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
        Ok(ModuleMap::parse(&text))
    }

    /// The module whose range contains `avma`.
    pub fn find(&self, avma: u64) -> Option<&MappedModule> {
        let idx = self.modules.partition_point(|m| m.start <= avma);
        self.modules[..idx].iter().rev().find(|m| m.contains(avma))
    }

    /// All modules, sorted by start address.
    pub fn modules(&self) -> &[MappedModule] {
        &self.modules
    }

    /// The first module whose path satisfies `pred` (e.g. file name starts with `libc.so`).
    pub fn find_by_name(&self, pred: impl Fn(&Path) -> bool) -> Option<&MappedModule> {
        self.modules.iter().find(|m| pred(&m.path))
    }
}

/// Makes a module from the mappings of one file, if it is an ELF file.
fn module_from(path: PathBuf, lines: &[MapLine<'_>]) -> Option<MappedModule> {
    if !looks_like_elf(&path) {
        return None;
    }
    let elf = ElfFile::load(&path).ok()?;
    let start = lines.iter().map(|l| l.start).min()?;
    let end = lines.iter().map(|l| l.end).max()?;
    let lowest = lines.iter().min_by_key(|l| l.offset)?;
    let svma = if lowest.offset == 0 {
        elf.first_load_vaddr()
    } else {
        elf.svma_for_file_offset(lowest.offset)?
    };
    Some(MappedModule {
        path,
        start,
        end,
        bias: lowest.start.wrapping_sub(svma),
    })
}

/// True for files under the system library directories `/lib*` and `/usr/lib*`
/// (e.g. `/lib/x86_64-linux-gnu/libc.so.6`, `/usr/lib64/ld-linux-x86-64.so.2`).
pub fn is_system_library(path: &Path) -> bool {
    let mut components = path.components();
    if components.next() != Some(std::path::Component::RootDir) {
        return false;
    }
    let is_lib = |c: Option<std::path::Component<'_>>| {
        c.and_then(|c| c.as_os_str().to_str())
            .is_some_and(|s| s.starts_with("lib"))
    };
    match components.next().and_then(|c| c.as_os_str().to_str()) {
        Some("usr") => is_lib(components.next()),
        Some(first) => first.starts_with("lib"),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(exe: &str) -> String {
        format!(
            "\
555555554000-555555556000 r--p 00000000 fe:01 1234 {exe}
555555556000-55555555a000 r-xp 00002000 fe:01 1234 {exe}
55555555a000-55555555c000 r--p 00006000 fe:01 1234 {exe}
55555555c000-55555555d000 rw-p 00007000 fe:01 1234 {exe}
55555555d000-55555557e000 rw-p 00000000 00:00 0                          [heap]
7ffff7d80000-7ffff7da6000 r--p 00000000 fe:01 99 /lib/x86_64-linux-gnu/libc.so.6
7ffff7da6000-7ffff7efb000 r-xp 00026000 fe:01 99 /lib/x86_64-linux-gnu/libc.so.6
7ffff7efb000-7ffff7f4e000 r--p 0017b000 fe:01 99 /lib/x86_64-linux-gnu/libc.so.6
7ffff7f4e000-7ffff7f52000 r--p 001ce000 fe:01 99 /lib/x86_64-linux-gnu/libc.so.6
7ffff7f52000-7ffff7f54000 rw-p 001d2000 fe:01 99 /lib/x86_64-linux-gnu/libc.so.6
7ffff7f54000-7ffff7f61000 rw-p 00000000 00:00 0
7ffff7fc1000-7ffff7fc5000 r--p 00000000 00:00 0                          [vvar]
7ffff7fc5000-7ffff7fc7000 r-xp 00000000 00:00 0                          [vdso]
7ffff7fc7000-7ffff7fc8000 r--p 00000000 fe:01 77 /usr/lib/locale/C.utf8/LC_CTYPE
7ffff7fd0000-7ffff7fd1000 rw-s 00000000 00:01 5 /tmp/gone (deleted)
7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0                          [stack]
"
        )
    }

    #[test]
    fn parses_maps() {
        let map = ModuleMap::parse(&sample("/bin/true"));
        let paths: Vec<_> = map.modules().iter().map(|m| m.path.clone()).collect();
        assert_eq!(
            paths,
            vec![
                PathBuf::from("/bin/true"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6")
            ]
        );
        let exe = &map.modules()[0];
        assert_eq!(exe.start, 0x555555554000);
        assert_eq!(exe.end, 0x55555555d000);
        assert_eq!(exe.bias, 0x555555554000);
        let libc = map.find(0x7ffff7da6123).unwrap();
        assert_eq!(libc.bias, 0x7ffff7d80000);
        assert_eq!(libc.to_svma(0x7ffff7da6123), 0x26123);
        assert!(map.find(0x55555555d100).is_none());
        assert!(map.find(0x7ffff7fc5100).is_none());
        let found = map.find_by_name(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libc.so"))
        });
        assert_eq!(found, Some(libc));
    }

    #[test]
    fn own_process_map() {
        let map = ModuleMap::read(std::process::id() as i32).unwrap();
        let me = std::env::current_exe().unwrap();
        let f = map
            .find(own_process_map as *const () as usize as u64)
            .unwrap();
        assert_eq!(f.path, me);
    }

    #[test]
    fn system_libraries() {
        assert!(is_system_library(Path::new(
            "/lib/x86_64-linux-gnu/libc.so.6"
        )));
        assert!(is_system_library(Path::new("/lib64/ld-linux-x86-64.so.2")));
        assert!(is_system_library(Path::new(
            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"
        )));
        assert!(is_system_library(Path::new("/usr/lib64/libfoo.so")));
        assert!(!is_system_library(Path::new("/usr/local/lib/libfoo.so")));
        assert!(!is_system_library(Path::new("/home/u/lib/libfoo.so")));
        assert!(!is_system_library(Path::new("/usr/bin/true")));
        assert!(!is_system_library(Path::new("lib/x.so")));
    }
}
