//! Finds the instructions that read or write memory that other threads may share, by
//! linear-sweep decoding (iced-x86): the instrumentation points of the data race detector.
//!
//! Kept: every instruction with a real memory access through an operand that is not a
//! private stack slot, including FS/GS-relative (TLS) accesses and vector/FP operands.
//! Left out:
//!
//! - `lea` and operands that do not touch memory (`nop [mem]`, `prefetch*`, `clflush*`,
//!   `clwb`, `cldemote`, `invlpg`, MPX `bnd*`);
//! - the implicit stack accesses of `push`/`pop`/`call`/`ret`/`leave` (return addresses
//!   and saved registers, which no pointer of the program reaches);
//! - operands based on RSP/ESP (spills, locals, outgoing arguments), and operands based on
//!   RBP with a negative displacement (locals) in functions that set up a frame pointer
//!   (`push rbp; mov rbp, rsp` at their start, or no function bounds known: neither a
//!   symbol nor an `.eh_frame` FDE; in other functions RBP is an ordinary register and
//!   such accesses stay) — *unless the function
//!   lets a stack address escape*: an instruction of it copies the stack pointer (RSP, or
//!   RBP as frame pointer) or an address computed from it (`lea reg, [rsp+8]`) anywhere
//!   but into the stack or frame pointer itself. Such a function may hand a pointer to its
//!   frame to another thread (`pthread_create(.., &local)`, a lambda capturing by
//!   reference, a scoped thread borrowing a local, an OpenMP shared local), so all its
//!   explicit frame operands are kept ([`MemoryAccessInsn::frame`]). A frame no address
//!   of which was ever computed is reached only through RSP/RBP by its own function, on
//!   its own thread. The `.cold` part of a function shares its frame and its verdict (by
//!   symbol name; in a stripped file it is judged alone). Code outside any known function
//!   keeps all its frame operands;
//! - reads at a fixed address (RIP-relative or absolute, not FS/GS) inside a read-only
//!   allocated section, or one only the dynamic loader writes (`.got`, `.got.plt`,
//!   `.data.rel.ro`...): constants, jump tables, GOT slots cannot race;
//! - string instructions (`movs`, `stos`, `lods`, `cmps`, `scas`, `ins`, `outs`, with or
//!   without `rep`): their extent depends on RCX, so they are listed apart by
//!   [`string_instructions`].

use std::collections::HashMap;
use std::ops::Range;

use iced_x86::{
    Instruction, InstructionInfoFactory, InstructionInfoOptions, Mnemonic, OpAccess, OpKind,
    Register,
};

use super::atomics::is_atomic;
use super::elf::ElfFile;
use super::elf_dwarf::merge;
use super::sweep::for_each_instruction;
use super::unwind_ranges::unwind_function_ranges;

/// How an instruction uses its memory operand(s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum AccessKind {
    /// Only reads (also conditional reads such as `cmovcc reg, [mem]`).
    Read,
    /// Only writes (also conditional writes such as masked stores).
    Write,
    /// Reads and writes (`add [mem], reg`, `xchg`, `cmpxchg`, ...).
    ReadWrite,
}

impl AccessKind {
    /// True for [`AccessKind::Read`] and [`AccessKind::ReadWrite`].
    pub fn reads(self) -> bool {
        self != AccessKind::Write
    }

    /// True for [`AccessKind::Write`] and [`AccessKind::ReadWrite`].
    pub fn writes(self) -> bool {
        self != AccessKind::Read
    }

    /// The kind of an instruction doing both `self` and `other`.
    fn union(self, other: AccessKind) -> AccessKind {
        if self == other {
            self
        } else {
            AccessKind::ReadWrite
        }
    }

    /// The kind for an iced-x86 operand access; `None` when memory is not accessed.
    fn from_op_access(access: OpAccess) -> Option<AccessKind> {
        match access {
            OpAccess::Read | OpAccess::CondRead => Some(AccessKind::Read),
            OpAccess::Write | OpAccess::CondWrite => Some(AccessKind::Write),
            OpAccess::ReadWrite | OpAccess::ReadCondWrite => Some(AccessKind::ReadWrite),
            OpAccess::None | OpAccess::NoMemAccess => None,
        }
    }
}

/// One instruction that reads and/or writes memory through an operand that other threads
/// may reach (not a stack slot of a frame whose address never escaped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct MemoryAccessInsn {
    /// The instruction's address in the file.
    pub svma: u64,
    /// Whether it reads, writes or both (over all its kept memory operands).
    pub kind: AccessKind,
    /// The memory operand size in bytes (the largest kept operand; the element size for
    /// gathers/scatters), capped at 64. Operands of unknown size (`xsave`...) count as 64.
    pub size: u8,
    /// LOCK-prefixed, or `XCHG` with memory (same rule as [`super::atomics::is_atomic`]).
    pub atomic: bool,
    /// A plain MOV-family load or store (`mov`, `movzx`, `movsx`, `movsxd`, `movd`, `movq`,
    /// `movss`, `movsd`, `movaps`, `movups`, `movapd`, `movupd`, `movdqa`, `movdqu` and
    /// their VEX/EVEX forms): on x86-64 these are also how atomic loads and release/relaxed
    /// atomic stores compile, so the detector cannot call them racy on sight.
    pub plain_mov: bool,
    /// The kept operand is a stack slot (RSP-based, or RBP-based in a frame-pointer
    /// function) of a function that lets a stack address escape (see the module doc).
    pub frame: bool,
}

/// The instructions of `elf`'s executable sections that access shared memory (see the
/// module documentation for what is left out), sorted by svma. When `only_in` is given,
/// only code inside those ranges is decoded (e.g. [`super::code_under_test_ranges`]).
pub fn memory_access_instructions(
    elf: &ElfFile,
    only_in: Option<&[Range<u64>]>,
) -> Vec<MemoryAccessInsn> {
    let mut scanner = Scanner::new(elf);
    let mut out = Vec::new();
    for_each_code_slice(elf, only_in, |svma, bytes| {
        for_each_instruction(svma, bytes, |insn| {
            if let Some(access) = scanner.classify(insn) {
                out.push(access);
            }
        });
    });
    out.sort_unstable_by_key(|a| a.svma);
    out.dedup_by_key(|a| a.svma);
    out
}

/// The svmas of the string instructions that access memory (`movs`, `stos`, `lods`,
/// `cmps`, `scas`, `ins`, `outs`, with or without a `rep` prefix) in `elf`'s executable
/// sections, sorted. `only_in` as for [`memory_access_instructions`].
pub fn string_instructions(elf: &ElfFile, only_in: Option<&[Range<u64>]>) -> Vec<u64> {
    let mut out = Vec::new();
    for_each_code_slice(elf, only_in, |svma, bytes| {
        for_each_instruction(svma, bytes, |insn| {
            if insn.is_string_instruction() && has_memory_operand(insn) {
                out.push(insn.ip());
            }
        });
    });
    out.sort_unstable();
    out.dedup();
    out
}

/// Calls `visit(svma, bytes)` for each executable section, or for each part of one that
/// lies inside `only_in` (ranges are expected to start at instruction boundaries, as
/// DWARF unit ranges do).
fn for_each_code_slice(
    elf: &ElfFile,
    only_in: Option<&[Range<u64>]>,
    mut visit: impl FnMut(u64, &[u8]),
) {
    let ranges = only_in.map(|r| merge(r.iter().filter(|r| r.start < r.end).cloned().collect()));
    for (svma, bytes) in elf.executable_sections() {
        let end = svma + bytes.len() as u64;
        match &ranges {
            None => visit(svma, bytes),
            Some(ranges) => {
                let first = ranges.partition_point(|r| r.end <= svma);
                for r in ranges[first..].iter().take_while(|r| r.start < end) {
                    let lo = r.start.max(svma);
                    let hi = r.end.min(end);
                    visit(lo, &bytes[(lo - svma) as usize..(hi - svma) as usize]);
                }
            }
        }
    }
}

/// True when one of the instruction's operands is in memory (explicit or implicit string
/// operands; not the implicit stack operands of push/pop/call/ret).
fn has_memory_operand(insn: &Instruction) -> bool {
    (0..insn.op_count()).any(|i| {
        matches!(
            insn.op_kind(i),
            OpKind::Memory
                | OpKind::MemorySegSI
                | OpKind::MemorySegESI
                | OpKind::MemorySegRSI
                | OpKind::MemorySegDI
                | OpKind::MemorySegEDI
                | OpKind::MemorySegRDI
                | OpKind::MemoryESDI
                | OpKind::MemoryESEDI
                | OpKind::MemoryESRDI
        )
    })
}

/// Instructions with a memory operand that do not access it (or only touch caches/TLB).
fn never_accesses_memory(mnemonic: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        mnemonic,
        Lea | Nop
            | Prefetch
            | Prefetchnta
            | Prefetcht0
            | Prefetcht1
            | Prefetcht2
            | Prefetchw
            | Prefetchwt1
            | Prefetchit0
            | Prefetchit1
            | Clflush
            | Clflushopt
            | Clwb
            | Cldemote
            | Invlpg
            | Bndmk
            | Bndcl
            | Bndcu
            | Bndcn
            | Bndldx
            | Bndstx
    )
}

/// Plain MOV-family loads and stores (see [`MemoryAccessInsn::plain_mov`]).
fn is_plain_mov(mnemonic: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        mnemonic,
        Mov | Movzx
            | Movsx
            | Movsxd
            | Movd
            | Movq
            | Movss
            | Movsd
            | Movaps
            | Movups
            | Movapd
            | Movupd
            | Movdqa
            | Movdqu
            | Vmovd
            | Vmovq
            | Vmovss
            | Vmovsd
            | Vmovaps
            | Vmovups
            | Vmovapd
            | Vmovupd
            | Vmovdqa
            | Vmovdqu
            | Vmovdqa32
            | Vmovdqa64
            | Vmovdqu8
            | Vmovdqu16
            | Vmovdqu32
            | Vmovdqu64
    )
}

/// Classifies instructions of one file.
struct Scanner<'a> {
    elf: &'a ElfFile,
    factory: InstructionInfoFactory,
    frames: FrameOracle<'a>,
}

impl<'a> Scanner<'a> {
    fn new(elf: &'a ElfFile) -> Scanner<'a> {
        Scanner {
            elf,
            factory: InstructionInfoFactory::new(),
            frames: FrameOracle {
                elf,
                functions: None,
                unwind_ranges: None,
                frame_pointer: HashMap::new(),
                escapes: HashMap::new(),
            },
        }
    }

    /// The access `insn` makes, or `None` when it makes no access worth instrumenting.
    fn classify(&mut self, insn: &Instruction) -> Option<MemoryAccessInsn> {
        if !has_memory_operand(insn)
            || insn.is_string_instruction()
            || never_accesses_memory(insn.mnemonic())
            || super::plt::is_call_through_slot(insn)
        {
            return None;
        }
        let mut kind: Option<AccessKind> = None;
        let mut size = 0usize;
        let mut frame = false;
        let info = self
            .factory
            .info_options(insn, InstructionInfoOptions::NO_REGISTER_USAGE);
        for mem in info.used_memory() {
            let Some(k) = AccessKind::from_op_access(mem.access()) else {
                continue;
            };
            let stack_slot = match mem.base() {
                Register::RSP | Register::ESP => true,
                Register::RBP | Register::EBP => {
                    (mem.displacement() as i64) < 0 && self.frames.has_frame_pointer(insn.ip())
                }
                _ => false,
            };
            let keep = if stack_slot {
                // The implicit operands of push/pop/call/ret never; explicit frame
                // operands when the function lets a stack address escape.
                let escaped = is_explicit_operand(insn, mem.base(), mem.displacement())
                    && self.frames.lets_stack_address_escape(insn.ip());
                frame |= escaped;
                escaped
            } else {
                !(mem.base() == Register::None
                    && k == AccessKind::Read
                    && mem.index() == Register::None
                    && !matches!(mem.segment(), Register::FS | Register::GS)
                    && is_read_only_data(self.elf, mem.displacement()))
            };
            if !keep {
                continue;
            }
            kind = Some(kind.map_or(k, |old| old.union(k)));
            let s = mem.memory_size().size();
            size = size.max(if s == 0 { 64 } else { s });
        }
        Some(MemoryAccessInsn {
            svma: insn.ip(),
            kind: kind?,
            size: size.min(64) as u8,
            atomic: is_atomic(insn),
            plain_mov: is_plain_mov(insn.mnemonic()),
            frame,
        })
    }
}

/// True when the memory operand with this base and displacement is the instruction's
/// explicit one (not the implicit stack operand of `push`/`pop`/`call`/`ret`/`leave`).
fn is_explicit_operand(insn: &Instruction, base: Register, displacement: u64) -> bool {
    (0..insn.op_count()).any(|i| insn.op_kind(i) == OpKind::Memory)
        && insn.memory_base() == base
        && insn.memory_displacement64() == displacement
}

/// Sections that are writable in the file but written only by the dynamic loader
/// (relocations, lazy binding), never by the program.
const LOADER_WRITTEN_SECTIONS: &[&str] = &[
    ".got",
    ".got.plt",
    ".data.rel.ro",
    ".init_array",
    ".fini_array",
    ".dynamic",
];

/// True when `svma` lies in an allocated section the program never writes: read-only
/// sections, and those only the dynamic loader writes.
fn is_read_only_data(elf: &ElfFile, svma: u64) -> bool {
    elf.allocated_section_at(svma).is_some_and(|(name, flags)| {
        flags & u64::from(goblin::elf::section_header::SHF_WRITE) == 0
            || LOADER_WRITTEN_SECTIONS.contains(&name)
    })
}

/// Knows which functions of a file use RBP as frame pointer; learns it on demand.
struct FrameOracle<'a> {
    elf: &'a ElfFile,
    /// Function symbol ranges sorted by start, computed on first need.
    functions: Option<Vec<(String, Range<u64>)>>,
    /// The `.eh_frame` FDE ranges, sorted: function bounds where no symbol is known.
    unwind_ranges: Option<Vec<Range<u64>>>,
    /// Function start → whether it sets up a frame pointer.
    frame_pointer: HashMap<u64, bool>,
    /// Function start → whether it lets a stack address escape.
    escapes: HashMap<u64, bool>,
}

impl FrameOracle<'_> {
    /// The function symbol ranges, sorted by start (computed on first need).
    fn functions(&mut self) -> &[(String, Range<u64>)] {
        let elf = self.elf;
        self.functions.get_or_insert_with(|| {
            let mut f = elf.function_ranges();
            f.sort_by_key(|(_, r)| (r.start, r.end));
            f
        })
    }

    /// The function containing `ip`: the last symbol starting at or before it that
    /// contains it (aliases share a start; look back a few for symbols nested in others),
    /// else the `.eh_frame` FDE containing it (stripped files), named "".
    fn function_at(&mut self, ip: u64) -> Option<(String, Range<u64>)> {
        let functions = self.functions();
        let idx = functions.partition_point(|(_, r)| r.start <= ip);
        let symbol = functions[..idx]
            .iter()
            .rev()
            .take(8)
            .find(|(_, r)| r.contains(&ip))
            .cloned();
        if symbol.is_some() {
            return symbol;
        }
        let elf = self.elf;
        let fdes = self
            .unwind_ranges
            .get_or_insert_with(|| unwind_function_ranges(elf));
        let idx = fdes.partition_point(|r| r.start <= ip);
        idx.checked_sub(1)
            .map(|i| fdes[i].clone())
            .filter(|r| r.contains(&ip))
            .map(|r| (String::new(), r))
    }

    /// Whether the function containing `ip` uses RBP as frame pointer; true when neither a
    /// function symbol nor an FDE contains `ip` (then [rbp-x] is assumed a local).
    fn has_frame_pointer(&mut self, ip: u64) -> bool {
        let Some((_, func)) = self.function_at(ip) else {
            return true;
        };
        self.frame_pointer_of(func)
    }

    /// Whether the function at `func` sets up a frame pointer (cached).
    fn frame_pointer_of(&mut self, func: Range<u64>) -> bool {
        let elf = self.elf;
        *self
            .frame_pointer
            .entry(func.start)
            .or_insert_with(|| sets_up_frame_pointer(elf, func))
    }

    /// Whether the function containing `ip` lets an address of its stack frame escape
    /// (see the module documentation); a `.cold` part answers for its parent too. True
    /// when neither a function symbol nor an FDE contains `ip`: without bounds, every
    /// frame is kept.
    fn lets_stack_address_escape(&mut self, ip: u64) -> bool {
        let Some((name, func)) = self.function_at(ip) else {
            return true;
        };
        if self.escapes_in(func) {
            return true;
        }
        // `f.cold` runs in f's frame: its frame accesses are f's.
        let Some(parent) = name.find(".cold").map(|at| name[..at].to_string()) else {
            return false;
        };
        let parent = self
            .functions()
            .iter()
            .find(|(n, _)| *n == parent)
            .map(|(_, r)| r.clone());
        parent.is_some_and(|r| self.escapes_in(r))
    }

    /// Whether the function at `func` itself computes a stack address (cached).
    fn escapes_in(&mut self, func: Range<u64>) -> bool {
        if let Some(&known) = self.escapes.get(&func.start) {
            return known;
        }
        let frame_pointer = self.frame_pointer_of(func.clone());
        let escapes = self
            .elf
            .read_svma(func.start, (func.end - func.start) as usize)
            .is_some_and(|bytes| {
                let mut found = false;
                for_each_instruction(func.start, bytes, |insn| {
                    found = found || derives_stack_address(insn, frame_pointer);
                });
                found
            });
        self.escapes.insert(func.start, escapes);
        escapes
    }
}

/// True when `insn` copies the stack pointer (or RBP, in a function that uses it as frame
/// pointer), or an address computed from it, anywhere but into the stack or frame pointer:
/// the first step of a pointer to the frame that code other than the function's own
/// RSP/RBP-relative operands may use. Comparisons and the prologue and epilogue's moves
/// between RSP and RBP are not; anything else that reads them as a value is.
fn derives_stack_address(insn: &Instruction, frame_pointer: bool) -> bool {
    let is_stack_register = |r: Register| {
        matches!(r, Register::RSP | Register::ESP | Register::SP)
            || (frame_pointer && matches!(r, Register::RBP | Register::EBP | Register::BP))
    };
    // Writing RSP, or RBP when it is the frame pointer, keeps the value a stack pointer.
    let into_stack_pointer = || {
        insn.op_count() > 0
            && insn.op0_kind() == OpKind::Register
            && is_stack_register(insn.op0_register())
    };
    match insn.mnemonic() {
        Mnemonic::Lea => {
            (is_stack_register(insn.memory_base()) || is_stack_register(insn.memory_index()))
                && !into_stack_pointer()
        }
        // `push rbp` saves the caller's frame pointer; comparisons only set flags.
        Mnemonic::Push if insn.op0_kind() == OpKind::Register => {
            matches!(insn.op0_register(), Register::RSP | Register::ESP)
        }
        Mnemonic::Cmp | Mnemonic::Test | Mnemonic::Pop | Mnemonic::Leave => false,
        _ => {
            (0..insn.op_count()).any(|i| {
                insn.op_kind(i) == OpKind::Register && is_stack_register(insn.op_register(i))
            }) && !into_stack_pointer()
        }
    }
}

/// True when the function at `func` starts with `push rbp` ... `mov rbp, rsp` within its
/// first few instructions (after `endbr64` and other pushes).
fn sets_up_frame_pointer(elf: &ElfFile, func: Range<u64>) -> bool {
    let len = (func.end - func.start).min(32) as usize;
    let Some(bytes) = elf.read_svma(func.start, len) else {
        return false;
    };
    let mut pushed_rbp = false;
    let mut found = false;
    let mut done = false;
    let mut count = 0;
    for_each_instruction(func.start, bytes, |insn| {
        if done {
            return;
        }
        count += 1;
        match insn.mnemonic() {
            Mnemonic::Endbr64 => {}
            Mnemonic::Push => {
                pushed_rbp |=
                    insn.op0_kind() == OpKind::Register && insn.op0_register() == Register::RBP;
            }
            Mnemonic::Mov
                if pushed_rbp
                    && insn.op0_kind() == OpKind::Register
                    && insn.op0_register() == Register::RBP
                    && insn.op1_kind() == OpKind::Register
                    && insn.op1_register() == Register::RSP =>
            {
                found = true;
                done = true;
            }
            _ if count > 6 => done = true,
            _ => {}
        }
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::test_build::build;
    use std::path::{Path, PathBuf};

    /// Decodes one instruction at 0x1000 in a file-less context (no symbols: the RBP rule
    /// applies) and classifies it.
    fn classify_bytes(bytes: &[u8]) -> Option<MemoryAccessInsn> {
        let elf = ElfFile::load(Path::new("/bin/true")).unwrap();
        let mut scanner = Scanner::new(&elf);
        // An address no function symbol of /bin/true covers.
        let base = 0x7fff_0000_0000;
        let mut out = None;
        for_each_instruction(base, bytes, |insn| {
            if out.is_none() {
                out = Some(scanner.classify(insn));
            }
        });
        out.flatten()
    }

    #[test]
    fn classifies_encodings() {
        // mov eax, [rdi]
        let a = classify_bytes(&[0x8b, 0x07]).unwrap();
        assert_eq!(
            (a.kind, a.size, a.atomic, a.plain_mov),
            (AccessKind::Read, 4, false, true)
        );
        // mov [rdi+8], rax
        let a = classify_bytes(&[0x48, 0x89, 0x47, 0x08]).unwrap();
        assert_eq!((a.kind, a.size, a.plain_mov), (AccessKind::Write, 8, true));
        // add [rdi], ecx
        let a = classify_bytes(&[0x01, 0x0f]).unwrap();
        assert_eq!((a.kind, a.plain_mov), (AccessKind::ReadWrite, false));
        // lock xadd [rdi], eax
        let a = classify_bytes(&[0xf0, 0x0f, 0xc1, 0x07]).unwrap();
        assert_eq!((a.kind, a.size, a.atomic), (AccessKind::ReadWrite, 4, true));
        // xchg [rdi], eax
        assert!(classify_bytes(&[0x87, 0x07]).unwrap().atomic);
        // movups xmm0, [rsi]
        let a = classify_bytes(&[0x0f, 0x10, 0x06]).unwrap();
        assert_eq!((a.kind, a.size, a.plain_mov), (AccessKind::Read, 16, true));
        // vmovdqu ymm0, [rsi]
        let a = classify_bytes(&[0xc5, 0xfe, 0x6f, 0x06]).unwrap();
        assert_eq!((a.size, a.plain_mov), (32, true));
        // mov rax, fs:[0x28] (TLS: kept)
        let a = classify_bytes(&[0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0]).unwrap();
        assert_eq!(a.size, 8);
        // push qword [rdi]: the read of [rdi] stays, the stack write goes
        assert_eq!(
            classify_bytes(&[0xff, 0x37]).unwrap().kind,
            AccessKind::Read
        );
        // cmpxchg [rdi], ecx (no lock): ReadCondWrite
        let a = classify_bytes(&[0x0f, 0xb1, 0x0f]).unwrap();
        assert_eq!((a.kind, a.atomic), (AccessKind::ReadWrite, false));
        // mov [rbp+0x10], eax: positive displacement kept
        assert!(classify_bytes(&[0x89, 0x45, 0x10]).is_some());

        // Frame operands outside any known function: kept, since nothing tells that no
        // address of the frame escaped. mov [rsp+8], rax ; mov [rbp-4], eax
        for bytes in [&[0x48, 0x89, 0x44, 0x24, 0x08][..], &[0x89, 0x45, 0xfc]] {
            let a = classify_bytes(bytes).unwrap();
            assert!(a.frame && a.kind == AccessKind::Write, "{bytes:x?}");
        }
        assert!(!classify_bytes(&[0x8b, 0x07]).unwrap().frame);

        // Left out: lea rax, [rdi+8] ; prefetcht0 [rdi] ; clflush [rdi] ; nop dword [rax] ;
        // push rax ; ret ; rep movsb ; stosq
        let none: [&[u8]; 8] = [
            &[0x48, 0x8d, 0x47, 0x08],
            &[0x0f, 0x18, 0x0f],
            &[0x0f, 0xae, 0x3f],
            &[0x0f, 0x1f, 0x00],
            &[0x50],
            &[0xc3],
            &[0xf3, 0xa4],
            &[0x48, 0xab],
        ];
        for bytes in none {
            assert_eq!(classify_bytes(bytes), None, "{bytes:x?}");
        }
    }

    /// `derives_stack_address` of the first instruction of `bytes`.
    fn derives(bytes: &[u8], frame_pointer: bool) -> bool {
        let mut out = None;
        for_each_instruction(0x1000, bytes, |insn| {
            out.get_or_insert_with(|| derives_stack_address(insn, frame_pointer));
        });
        out.unwrap()
    }

    #[test]
    fn tells_which_instructions_make_a_stack_address() {
        // lea rdi, [rsp+12] ; mov rax, rsp ; mov [rdi], rsp ; push rsp
        for bytes in [
            &[0x48, 0x8d, 0x7c, 0x24, 0x0c][..],
            &[0x48, 0x89, 0xe0],
            &[0x48, 0x89, 0x27],
            &[0x54],
        ] {
            assert!(derives(bytes, false), "{bytes:x?}");
        }
        // lea rax, [rbp-0x14] and mov rdi, rbp: a frame address only when RBP is the frame
        // pointer.
        for bytes in [&[0x48, 0x8d, 0x45, 0xec][..], &[0x48, 0x89, 0xef]] {
            assert!(derives(bytes, true), "{bytes:x?}");
            assert!(!derives(bytes, false), "{bytes:x?}");
        }
        // Prologue and epilogue: push rbp ; mov rbp, rsp ; sub rsp, 0x20 ;
        // lea rsp, [rbp-0x10] ; mov rsp, rbp ; leave ; pop rbp ; and a stack probe's
        // cmp rsp, r11.
        for bytes in [
            &[0x55][..],
            &[0x48, 0x89, 0xe5],
            &[0x48, 0x83, 0xec, 0x20],
            &[0x48, 0x8d, 0x65, 0xf0],
            &[0x48, 0x89, 0xec],
            &[0xc9],
            &[0x5d],
            &[0x4c, 0x39, 0xdc],
        ] {
            assert!(!derives(bytes, true), "{bytes:x?}");
        }
        // mov rbp, rsp outside a frame-pointer function makes RBP a stack pointer.
        assert!(derives(&[0x48, 0x89, 0xe5], false));
    }

    const PROGRAM: &str = r#"
#include <stdio.h>
long counter;
int flag;
struct point { int x; long y; };
__attribute__((noinline)) void bump(void) { counter++; }
__attribute__((noinline)) void set_y(struct point *p, long v) { p->y = v; }
__attribute__((noinline)) void atomic_add(void) { __atomic_fetch_add(&flag, 1, __ATOMIC_SEQ_CST); }
__attribute__((noinline)) int locals(int n) {
    volatile int arr[16];
    for (int i = 0; i < 16; i++) arr[i] = i * n;
    return arr[n & 15];
}
__attribute__((noinline)) double scale(double x) { return x * 3.7; }
__attribute__((noinline)) void publish(int *p) { *p += 1; }
__attribute__((noinline)) int escapes(int n) {
    int local = n;
    publish(&local);
    local += n;
    return local;
}
int main(int argc, char **argv) {
    struct point pt = {0, 0};
    bump();
    set_y(&pt, argc);
    atomic_add();
    printf("%ld %ld %d %f %d\n", counter, pt.y, locals(argc), scale(argc), escapes(argc));
    return 0;
}
"#;

    /// Compiles `PROGRAM` at `opt` into its own temp dir; `None` when gcc is missing.
    fn compile(opt: &str) -> Option<PathBuf> {
        let tag = format!("accesses{opt}");
        build(
            &tag,
            "gcc",
            &[opt, "-g", "-fno-stack-protector"],
            "a.c",
            PROGRAM,
        )
    }

    /// The accesses of `elf` inside function `name`.
    fn accesses_in(elf: &ElfFile, all: &[MemoryAccessInsn], name: &str) -> Vec<MemoryAccessInsn> {
        all.iter()
            .filter(|a| elf.symbolize(a.svma).is_some_and(|(n, _)| n == name))
            .copied()
            .collect()
    }

    /// Checks the accesses of the compiled `PROGRAM`; `o0` tells the optimisation level.
    fn check_program(exe: &Path, o0: bool) {
        let elf = ElfFile::load(exe).unwrap();
        let ranges = elf.dwarf_code_ranges();
        let all = memory_access_instructions(&elf, Some(&ranges));
        assert!(all.windows(2).all(|w| w[0].svma < w[1].svma));
        let everything = memory_access_instructions(&elf, None);
        assert!(everything.len() >= all.len());

        // counter++: a read and a write of 8 bytes (at -O2 possibly one `add [rip+x], 1`).
        let bump = accesses_in(&elf, &all, "bump");
        assert!(!bump.is_empty(), "{bump:?}");
        assert!(bump.iter().all(|a| a.size == 8 && !a.atomic), "{bump:?}");
        assert!(bump.iter().any(|a| a.kind.reads()), "{bump:?}");
        assert!(bump.iter().any(|a| a.kind.writes()), "{bump:?}");

        // p->y = v: one 8-byte write through a pointer (at -O0 also the spills of p and v
        // to [rbp-x], which must be left out).
        let set_y = accesses_in(&elf, &all, "set_y");
        let writes: Vec<_> = set_y
            .iter()
            .filter(|a| a.kind == AccessKind::Write)
            .collect();
        assert_eq!(writes.len(), 1, "{set_y:?}");
        assert_eq!(writes[0].size, 8);
        assert!(writes[0].plain_mov);
        if o0 {
            // The spills and reloads of p and v through [rbp-x] are left out: only the
            // store through p remains.
            assert_eq!(set_y.len(), 1, "{set_y:?}");
        }

        // The atomic fetch_add.
        let atomic = accesses_in(&elf, &all, "atomic_add");
        assert_eq!(atomic.len(), 1, "{atomic:?}");
        assert!(atomic[0].atomic);
        assert_eq!(atomic[0].size, 4);
        assert_eq!(atomic[0].kind, AccessKind::ReadWrite);

        // The local array lives on the stack: nothing of `locals` is kept.
        let locals = accesses_in(&elf, &all, "locals");
        assert!(locals.is_empty(), "{locals:?}");

        // `escapes` hands &local to another function: its frame accesses are kept (the
        // read of `local` after the call at least), and only there.
        let escapes = accesses_in(&elf, &all, "escapes");
        assert!(
            escapes.iter().any(|a| a.frame && a.kind.reads()),
            "{escapes:?}"
        );
        assert!(all.iter().filter(|a| a.frame).all(|a| elf
            .symbolize(a.svma)
            .is_some_and(|(n, _)| n == "escapes" || n == "main")));

        // The constant 3.7 is read from .rodata: that cannot race.
        let scale = accesses_in(&elf, &all, "scale");
        assert!(scale.is_empty(), "{scale:?}");

        assert!(string_instructions(&elf, Some(&ranges)).len() <= 2);
    }

    #[test]
    fn finds_accesses_in_compiled_program() {
        for (opt, o0) in [("-O0", true), ("-O2", false)] {
            let Some(exe) = compile(opt) else {
                eprintln!("gcc not available; skipping");
                return;
            };
            check_program(&exe, o0);
            let _ = std::fs::remove_dir_all(exe.parent().unwrap());
        }
    }

    #[test]
    fn libc_has_string_instructions_and_accesses() {
        let libc = ElfFile::load(Path::new("/lib/x86_64-linux-gnu/libc.so.6")).unwrap();
        assert!(!string_instructions(&libc, None).is_empty());
        let all = memory_access_instructions(&libc, None);
        assert!(all.len() > 10_000, "{}", all.len());
        assert!(all.iter().any(|a| a.atomic));
        assert!(all.iter().all(|a| a.size > 0 && a.size <= 64));
    }
}
