//! Test support: building small programs with the system compilers into a fresh temporary
//! directory, so that tests of the binary layer run on real compiler output.

use std::path::PathBuf;
use std::process::Command;

/// Compiles `source` (saved as `file_name`) with `compiler` and `args` into a directory
/// named after `tag`; the executable's path, or None when the compiler is missing or fails
/// (the caller then skips its test).
pub fn build(
    tag: &str,
    compiler: &str,
    args: &[&str],
    file_name: &str,
    source: &str,
) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("mcheck-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let src = dir.join(file_name);
    std::fs::write(&src, source).ok()?;
    let exe = dir.join(format!("{file_name}.bin"));
    let ok = Command::new(compiler)
        .args(args)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(exe)
}
