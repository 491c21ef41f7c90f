//! Stack unwinding of a traced thread with framehop, using each module's `.eh_frame`,
//! `.eh_frame_hdr` and `.text` (for prologue/epilogue analysis) from the ELF file.
//!
//! The caller supplies the thread's `rip`, `rsp`, `rbp` and a function that reads a
//! 64-bit word of the tracee's memory.

use std::collections::HashSet;
use std::ops::{Deref, Range};
use std::path::PathBuf;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};

use super::elf::ElfFile;
use super::modules::{MappedModule, ModuleMap};

/// Bytes of one section of a cached ELF file, shared without copying.
#[derive(Debug, Clone)]
pub struct SectionBytes {
    elf: Arc<ElfFile>,
    range: Range<usize>,
}

impl Deref for SectionBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.elf.data()[self.range.clone()]
    }
}

/// A stack unwinder for one process, knowing the modules of a [`ModuleMap`].
pub struct StackUnwinder {
    unwinder: UnwinderX86_64<SectionBytes>,
    cache: CacheX86_64,
    added: HashSet<(PathBuf, u64)>,
}

impl std::fmt::Debug for StackUnwinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackUnwinder")
            .field("modules", &self.added.len())
            .finish_non_exhaustive()
    }
}

impl StackUnwinder {
    /// An unwinder knowing every module of `map` (files that cannot be loaded are skipped).
    pub fn new(map: &ModuleMap) -> StackUnwinder {
        let mut unwinder = StackUnwinder {
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            added: HashSet::new(),
        };
        unwinder.update(map);
        unwinder
    }

    /// Adds the modules of `map` not known yet (call after `dlopen`).
    pub fn update(&mut self, map: &ModuleMap) {
        for m in map.modules() {
            self.add_module(m);
        }
    }

    /// Adds one module; returns false if it was already known or cannot be loaded.
    pub fn add_module(&mut self, module: &MappedModule) -> bool {
        let key = (module.path.clone(), module.start);
        if self.added.contains(&key) {
            return false;
        }
        let Ok(elf) = ElfFile::load(&module.path) else {
            return false;
        };
        let section = |name: &str| {
            let s = elf.section(name).filter(|s| !s.data.is_empty())?;
            let bytes = SectionBytes {
                elf: elf.clone(),
                range: s.file_offset..s.file_offset + s.data.len(),
            };
            Some((s.svma..s.svma + s.size, bytes))
        };
        let (text_svma, text) = section(".text").unzip();
        let (eh_frame_svma, eh_frame) = section(".eh_frame").unzip();
        let (eh_frame_hdr_svma, eh_frame_hdr) = section(".eh_frame_hdr").unzip();
        let got_svma = elf.section(".got").map(|s| s.svma..s.svma + s.size);
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma,
            text,
            got_svma,
            eh_frame_svma,
            eh_frame,
            eh_frame_hdr_svma,
            eh_frame_hdr,
            stubs_svma: None,
            stub_helper_svma: None,
            unwind_info: None,
            debug_frame: None,
            text_segment_svma: None,
            text_segment: None,
        };
        let name = module.path.to_string_lossy().into_owned();
        self.unwinder.add_module(Module::new(
            name,
            module.start..module.end,
            module.bias,
            info,
        ));
        self.added.insert(key);
        true
    }

    /// Unwinds from the given registers, returning at most `max_frames` avmas.
    ///
    /// The first address is `rip` itself; the following ones are **return addresses**
    /// (the instruction after each call), as framehop reports them. To symbolize the call
    /// site, look up [`lookup_address`]`(index, addr)`, which subtracts 1 from return
    /// addresses. `read_u64` reads a word of the tracee's stack (None when unreadable).
    /// Unwinding stops early at the stack's root or on the first error.
    pub fn unwind(
        &mut self,
        rip: u64,
        rsp: u64,
        rbp: u64,
        max_frames: usize,
        read_u64: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Vec<u64> {
        let mut out = Vec::new();
        if max_frames == 0 {
            return out;
        }
        let regs = UnwindRegsX86_64::new(rip, rsp, rbp);
        let mut read = |addr: u64| read_u64(addr).ok_or(());
        let mut iter = self
            .unwinder
            .iter_frames(rip, regs, &mut self.cache, &mut read);
        while out.len() < max_frames {
            match iter.next() {
                Ok(Some(frame)) => out.push(frame.address()),
                Ok(None) | Err(_) => break,
            }
        }
        out
    }
}

/// The address to symbolize for frame `frame_index` of [`StackUnwinder::unwind`]'s result:
/// `addr` for frame 0 (the instruction pointer), `addr - 1` for return addresses, so that
/// the lookup lands inside the call instruction.
pub fn lookup_address(frame_index: usize, addr: u64) -> u64 {
    let frame = if frame_index == 0 {
        Some(FrameAddress::from_instruction_pointer(addr))
    } else {
        FrameAddress::from_return_address(addr)
    };
    frame.map_or(addr, |f| f.address_for_lookup())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_addresses() {
        assert_eq!(lookup_address(0, 100), 100);
        assert_eq!(lookup_address(1, 100), 99);
    }

    #[test]
    fn builds_from_own_maps() {
        let map = ModuleMap::read(std::process::id() as i32).unwrap();
        let unwinder = StackUnwinder::new(&map);
        assert!(unwinder.added.len() >= 2, "{unwinder:?}");
    }
}
