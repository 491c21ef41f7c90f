//! Turning a stopped thread into a symbolized stack, and addresses into names: source
//! locations for call sites and variable names for synchronisation objects.

use std::path::Path;

use crate::binary::{is_system_library, lookup_address, ModuleMap, StackUnwinder, Symbolizer};
use crate::report::Frame;
use crate::tracee::memory::Memory;

/// Frames shown per thread.
pub const MAX_FRAMES: usize = 12;

/// Symbolization state kept across executions (same binaries, same addresses: ASLR is off).
#[derive(Default)]
pub struct Symbols {
    symbolizer: Symbolizer,
    map: ModuleMap,
    unwinder: Option<StackUnwinder>,
}

impl Symbols {
    /// Re-reads the module map of `pid` (after libraries are loaded).
    pub fn refresh(&mut self, pid: i32) {
        if let Ok(map) = ModuleMap::read(pid) {
            match &mut self.unwinder {
                Some(u) => u.update(&map),
                None => self.unwinder = Some(StackUnwinder::new(&map)),
            }
            self.map = map;
        }
    }

    /// The module map as last read.
    pub fn modules(&self) -> &ModuleMap {
        &self.map
    }

    /// The symbolized stack of a thread stopped at `pc` with these stack registers.
    pub fn stack(&mut self, pc: u64, rsp: u64, rbp: u64, mem: &Memory) -> Vec<Frame> {
        let Some(unwinder) = self.unwinder.as_mut() else {
            return vec![self.frame_at(pc, false).remove(0)];
        };
        let mut read = |a: u64| mem.read_u64(a).ok();
        let addrs = unwinder.unwind(pc, rsp, rbp, MAX_FRAMES, &mut read);
        let mut frames = Vec::new();
        for (i, a) in addrs.iter().enumerate() {
            frames.extend(self.frame_at(lookup_address(i, *a), false));
            if frames.len() >= MAX_FRAMES + 4 {
                break;
            }
        }
        if frames.is_empty() {
            frames = self.frame_at(pc, false);
        }
        frames
    }

    /// Source frames for `addr` (innermost inlined first; never empty). With
    /// `return_address`, the call instruction before `addr` is looked up.
    pub fn frame_at(&mut self, addr: u64, return_address: bool) -> Vec<Frame> {
        let lookup = if return_address {
            addr.saturating_sub(1)
        } else {
            addr
        };
        let address = format!("{addr:#x}");
        let Some(module) = self.map.find(lookup).cloned() else {
            return vec![Frame {
                address,
                ..Default::default()
            }];
        };
        let svma = module.to_svma(lookup);
        let module_name = file_name(&module.path);
        let user_code = !is_system_library(&module.path);
        let src = self.symbolizer.frames(&module.path, svma);
        if src.is_empty() {
            return vec![Frame {
                address,
                module: Some(module_name),
                offset: Some(format!("{svma:#x}")),
                user_code,
                ..Default::default()
            }];
        }
        let n = src.len();
        src.into_iter()
            .enumerate()
            .map(|(i, s)| Frame {
                address: address.clone(),
                offset: s.line.is_none().then(|| format!("{svma:#x}")),
                function: s.function,
                function_offset: s.symbol_offset.map(|o| format!("{o:#x}")),
                file: s.file,
                line: s.line,
                module: Some(module_name.clone()),
                inlined: i + 1 < n,
                user_code,
            })
            .collect()
    }

    /// The call site of a return address, as one frame: in an inline chain, the innermost
    /// frame that is not toolchain library code (Rust's std/core/alloc sources, C/C++ system
    /// headers), else the innermost.
    pub fn call_site(&mut self, return_address: u64) -> Frame {
        self.site(return_address, true)
    }

    /// Like [`Self::call_site`], for the address of an instruction itself (an atomic or PAUSE
    /// breakpoint) rather than a return address.
    pub fn instruction_site(&mut self, pc: u64) -> Frame {
        self.site(pc, false)
    }

    fn site(&mut self, addr: u64, return_address: bool) -> Frame {
        let mut frames = self.frame_at(addr, return_address);
        let own = frames.iter().position(Frame::is_own_source);
        frames.swap_remove(own.unwrap_or(0))
    }

    /// A name for the object at `addr`: its variable (`` `lock_a` ``) or what memory it is in.
    pub fn object_name(&mut self, addr: u64) -> String {
        let module = self
            .map
            .modules()
            .iter()
            .rfind(|m| m.start <= addr)
            .cloned();
        if let Some(m) = module {
            if let Some(name) = self.symbolizer.variable_name(&m.path, m.to_svma(addr)) {
                return format!("`{name}` ({addr:#x})");
            }
        }
        format!("at {addr:#x}")
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The innermost frame in the program's own code, else the innermost frame. Its own code
/// means its own sources: a frame of Rust's std or core (or a C++ header) inlined into the
/// executable is passed over for the program's line that called it.
pub fn primary_location(stack: &[Frame]) -> Option<Frame> {
    stack
        .iter()
        .find(|f| f.user_code && f.is_own_source())
        .or_else(|| stack.iter().find(|f| f.user_code && f.file.is_some()))
        .or_else(|| stack.iter().find(|f| f.user_code))
        .or(stack.first())
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(file: &str, line: u32) -> Frame {
        Frame {
            file: Some(file.to_string()),
            line: Some(line),
            user_code: true,
            ..Default::default()
        }
    }

    #[test]
    fn a_finding_is_located_at_the_programs_line_not_at_inlined_std() {
        let stack = [
            frame("/rustc/abc/library/std/src/sys/sync/mutex/futex.rs", 73),
            frame("/rustc/abc/library/std/src/sync/mutex.rs", 317),
            frame("/src/rust_abba.rs", 21),
        ];
        let at = primary_location(&stack).unwrap();
        assert_eq!(
            (at.file.as_deref(), at.line),
            (Some("/src/rust_abba.rs"), Some(21))
        );
        // Only library sources: the innermost of them.
        let at = primary_location(&stack[..2]).unwrap();
        assert_eq!(at.line, Some(73));
    }
}
