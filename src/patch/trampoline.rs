//! The code a patched access site jumps to: it appends (effective address, site id) to the
//! access log, runs the original instruction (relocated), and jumps back after the site.
//!
//! ```text
//!   mov [scratch_rax], rax          save the two registers it uses (absolute disp32:
//!   mov [scratch_rcx], rcx          the log lives below 2 GiB)
//!   lea rax, [operand]              the effective address, from the original registers
//!   (mov rcx, fs:[0]; lea rax, [rax+rcx])   for an fs-relative operand
//!   mov rcx, [cursor]               minus the bytes left in the log
//!   jrcxz full                      none left: stop into the tracer
//! resume:
//!   mov [rcx+end], rax              the record
//!   mov qword [rcx+end+8], site
//!   lea rcx, [rcx+16]
//!   mov [cursor], rcx               committed
//!   mov rcx, [scratch_rcx]
//!   mov rax, [scratch_rax]          every register as at the site again
//!   <the original instruction>      relocated (RIP-relative operands re-encoded)
//!   jmp site+len
//! full:
//!   int3                            the tracer drains the log, resets the cursor and rcx,
//!                                   and resumes at `resume`
//! ```
//!
//! Nothing in it changes the flags (`mov`, `lea` and `jrcxz` do not), nor the stack, nor
//! any register once the original instruction runs. [`TrampolineMeta::exit_at`] says how to
//! put a thread stopped anywhere inside back where it would be without the trampoline.
//!
//! An indirect call through memory (`call [rax+0xb8]`, a C++ virtual call, CPython's slot
//! calls) is logged the same way, then *emulated* rather than relocated, so that the callee
//! sees the original return address (stacks, unwinding and C++ exceptions pass through the
//! original call site, never through generated code): the target is loaded into `r11`
//! (dead at a call by the ABI) and kept in a scratch slot, the return address pushed, and
//! the code jumps through the slot.
//!
//! A call of a libc memory function the program makes (`memcpy`, `memcmp`...) is logged at
//! the function's entry: its PLT stub, or the program's own `call`/`jmp` through the
//! function's GOT slot ([`generate_entry`]). The flags and `r11` are dead there by the
//! calling convention, so this code may compare and branch: it appends three records —
//! (rdi, site id), (rsi, rdx), (return address, rcx) — when the log has room for all three,
//! and otherwise stops into the tracer, which records the call itself.

use iced_x86::{Code, Encoder, FlowControl, Instruction, MemoryOperand, OpKind, Register};

use super::log_layout::{LogLayout, CALL_RECORDS, RECORD_BYTES};

/// Most bytes a trampoline takes.
pub const MAX_TRAMPOLINE: u64 = 192;

/// Why an instruction is left to the breakpoint path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unpatchable {
    /// A jump or return that reads memory, or a call whose operand uses `r11`: relocating
    /// it would move a target into generated code.
    #[error("it is a branch")]
    Branch,
    /// No explicit memory operand to compute.
    #[error("it has no explicit memory operand")]
    NoMemoryOperand,
    /// A vector-indexed (gather/scatter) operand: no single address.
    #[error("its operand is vector-indexed")]
    Vsib,
    /// A GS-relative operand (no known base in user space).
    #[error("its operand is GS-relative")]
    GsSegment,
    /// Its RIP-relative operand is out of reach from the trampoline.
    #[error("its RIP-relative operand is out of reach")]
    OutOfReach,
    /// The encoder refused it.
    #[error("it could not be re-encoded: {0}")]
    Encode(String),
}

/// Where the parts of one trampoline are, to move a thread stopped inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrampolineMeta {
    /// The original site.
    pub site: u64,
    /// Its length in bytes.
    pub site_len: u8,
    /// The trampoline's address.
    pub at: u64,
    /// The trampoline's length.
    pub len: u16,
    /// Offset of the instruction that appends the record (where a drained full log resumes).
    pub resume: u16,
    /// Offset from which the record is committed (the cursor was written).
    pub committed: u16,
    /// Offset of the relocated original instruction.
    pub insn: u16,
    /// Offset of the jump back.
    pub back: u16,
    /// Offset of the `int3` taken when the log is full.
    pub full: u16,
    /// What it does.
    pub kind: Kind,
}

/// What a trampoline does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Records an access, runs the relocated instruction, jumps back after the site.
    Access,
    /// Records the pointer an indirect call reads, then makes the call (return address:
    /// after the site). `back` is the final jump through the target slot.
    Call,
    /// Only runs a relocated instruction (one moved out of a neighbour's way).
    Plain,
    /// Records a call of a modelled memory function at its entry (`records` records), then
    /// jumps through its GOT slot; `pushes` when the site is a call whose return address
    /// it pushes. `back` is where the code goes on once the return address is pushed.
    Entry {
        /// Records one call takes.
        records: u8,
        /// The site is a call (the code pushes its return address).
        pushes: bool,
    },
    /// Calls an allocator and records the call when it returns (`wrapper.rs`): `insn` is
    /// where the call begins, `resume` where it returns to, `back` the final `ret`.
    Wrapper {
        /// The site is a call (the code pushes its return address).
        pushes: bool,
    },
}

impl Kind {
    /// Whether it records anything.
    pub fn logs(&self) -> bool {
        *self != Kind::Plain
    }
}

/// What to do with a thread stopped at some address inside a trampoline so that it is
/// where it would be without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The original instruction has not run: move the thread to the site, with `rax` and
    /// `rcx` taken from the scratch slots when they may have been changed, and the last
    /// record taken back when it was committed.
    BeforeInsn {
        /// rax may differ from its value at the site: restore it from its slot.
        restore_rax: bool,
        /// rcx likewise.
        restore_rcx: bool,
        /// The record of this access is the last one in the log: drop it.
        uncommit: bool,
    },
    /// The original instruction has run: continue after the site.
    AfterInsn,
    /// The emulated call has pushed its return address: continue at its target (in the
    /// log header's target slot).
    AfterCall,
    /// At the entry of a modelled memory function, before it: move the thread to the site,
    /// with `rax` from its slot when it may have been changed, the call's records taken
    /// back when they were committed, and the return address popped when the code pushed
    /// it.
    BeforeEntry {
        /// rax may differ from its value at the site.
        restore_rax: bool,
        /// Records to take back.
        uncommit: u8,
        /// The return address was pushed.
        unpush: bool,
    },
    /// In an allocator's wrapper, before its call: move the thread to the site, with the
    /// `unpush` words the code pushed popped.
    BeforeWrappedCall {
        /// Words to pop.
        unpush: u8,
    },
    /// In an allocator's wrapper, once the allocator returned: go on at the caller, the
    /// call recorded by the tracer unless the code `logged` it, popping the three stacked
    /// arguments unless they were (`args_popped`) and then the return address.
    AfterWrappedCall {
        /// The call's records are committed.
        logged: bool,
        /// The arguments were popped: `[rsp]` is the return address.
        args_popped: bool,
    },
}

/// A generated trampoline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trampoline {
    /// Its code.
    pub bytes: Vec<u8>,
    /// Where its parts are.
    pub meta: TrampolineMeta,
}

/// Whether `insn` (decoded at its runtime address) can be moved into a trampoline, or, for
/// a near indirect call through memory, emulated by one.
pub fn check(insn: &Instruction) -> Result<(), Unpatchable> {
    if is_emulated_call(insn) {
        return Ok(());
    }
    if insn.flow_control() != FlowControl::Next {
        return Err(Unpatchable::Branch);
    }
    if !(0..insn.op_count()).any(|i| insn.op_kind(i) == OpKind::Memory) {
        return Err(Unpatchable::NoMemoryOperand);
    }
    if insn.is_vsib() {
        return Err(Unpatchable::Vsib);
    }
    if insn.memory_segment() == Register::GS {
        return Err(Unpatchable::GsSegment);
    }
    Ok(())
}

/// Whether `insn` is a near indirect call through memory that a trampoline can emulate (its
/// operand does not use `r11`, which the emulation loads the target into).
fn is_emulated_call(insn: &Instruction) -> bool {
    insn.code() == Code::Call_rm64
        && insn.op0_kind() == OpKind::Memory
        && !insn.is_vsib()
        && insn.memory_segment() != Register::GS
        && ![Register::R11, Register::R11D].contains(&insn.memory_base())
        && ![Register::R11, Register::R11D].contains(&insn.memory_index())
}

/// The trampoline for site `insn` (decoded at its runtime address, with its original
/// `bytes`), recording site id `site`, placed at `at`, logging into `log`.
pub fn generate(
    insn: &Instruction,
    bytes: &[u8],
    site: u32,
    at: u64,
    log: &LogLayout,
) -> Result<Trampoline, Unpatchable> {
    check(insn)?;
    let mut c = Vec::with_capacity(MAX_TRAMPOLINE as usize);
    abs32(&mut c, &[0x48, 0x89, 0x04, 0x25], log.scratch_rax()); // mov [scratch_rax], rax
    abs32(&mut c, &[0x48, 0x89, 0x0c, 0x25], log.scratch_rcx()); // mov [scratch_rcx], rcx
    effective_address(&mut c, insn, at)?;
    abs32(&mut c, &[0x48, 0x8b, 0x0c, 0x25], log.cursor()); // mov rcx, [cursor]
    let jrcxz = c.len();
    c.extend_from_slice(&[0xe3, 0]); // jrcxz full (patched below)
    let resume = c.len();
    let end = log.end() as u32;
    c.extend_from_slice(&[0x48, 0x89, 0x81]); // mov [rcx+end], rax
    c.extend_from_slice(&end.to_le_bytes());
    c.extend_from_slice(&[0x48, 0xc7, 0x81]); // mov qword [rcx+end+8], site
    c.extend_from_slice(&(end + 8).to_le_bytes());
    c.extend_from_slice(&site.to_le_bytes());
    c.extend_from_slice(&[0x48, 0x8d, 0x49, RECORD_BYTES as u8]); // lea rcx, [rcx+16]
    abs32(&mut c, &[0x48, 0x89, 0x0c, 0x25], log.cursor()); // mov [cursor], rcx
    let committed = c.len();
    abs32(&mut c, &[0x48, 0x8b, 0x0c, 0x25], log.scratch_rcx()); // mov rcx, [scratch_rcx]
    abs32(&mut c, &[0x48, 0x8b, 0x04, 0x25], log.scratch_rax()); // mov rax, [scratch_rax]
    let insn_at = c.len();
    let call = is_emulated_call(insn);
    if call {
        // mov r11, [operand] (the target, from the original registers); keep it in the
        // target slot; push the return address; jmp [target slot].
        let target = load_operand(insn, Register::R11)?;
        encode(&mut c, &target, at + insn_at as u64)?;
        abs32(&mut c, &[0x4c, 0x89, 0x1c, 0x25], log.scratch_target()); // mov [slot], r11
        c.extend_from_slice(&[0x49, 0xbb]); // movabs r11, return address
        c.extend_from_slice(&insn.next_ip().to_le_bytes());
        c.extend_from_slice(&[0x41, 0x53]); // push r11
    } else {
        relocate(&mut c, insn, bytes, at + insn_at as u64)?;
    }
    let back = c.len();
    if call {
        abs32(&mut c, &[0xff, 0x24, 0x25], log.scratch_target()); // jmp [slot]
    } else {
        let after_site = insn.next_ip();
        let rel = after_site.wrapping_sub(at + back as u64 + 5) as i64;
        let rel = i32::try_from(rel).map_err(|_| Unpatchable::OutOfReach)?;
        c.push(0xe9);
        c.extend_from_slice(&rel.to_le_bytes());
    }
    let full = c.len();
    c.push(0xcc);
    c[jrcxz + 1] = u8::try_from(full - (jrcxz + 2)).expect("jrcxz reaches the int3");
    debug_assert!(c.len() as u64 <= MAX_TRAMPOLINE);
    let meta = TrampolineMeta {
        site: insn.ip(),
        site_len: insn.len() as u8,
        at,
        len: c.len() as u16,
        resume: resume as u16,
        committed: committed as u16,
        insn: insn_at as u16,
        back: back as u16,
        full: full as u16,
        kind: if call { Kind::Call } else { Kind::Access },
    };
    Ok(Trampoline { bytes: c, meta })
}

/// Appends code leaving in r11 the bytes the string function of `m` reads: the string's
/// length with its NUL, at most rdx when bounded. Uses r11, r10 and the flags (dead at a
/// function's entry).
///
/// ```text
///   mov r11, src
///   (lea r10, [src+rdx])         the bound
/// next:
///   (cmp r11, r10; jae done)
///   cmp byte [r11], 0
///   je nul
///   inc r11
///   jmp next
/// nul:
///   inc r11                      the NUL is read too
/// done:
///   sub r11, src
/// ```
fn measure_string(c: &mut Vec<u8>, m: Measure) {
    // ModRM register field of the source (rdi 7, rsi 6), and SIB of [src + rdx].
    let (modrm, sib) = if m.second { (0xf3, 0x16) } else { (0xfb, 0x17) };
    c.extend_from_slice(&[0x49, 0x89, modrm]); // mov r11, src
    if m.bounded {
        c.extend_from_slice(&[0x4c, 0x8d, 0x14, sib]); // lea r10, [src+rdx]
    }
    let next = c.len();
    let jae = m.bounded.then(|| {
        c.extend_from_slice(&[0x4d, 0x39, 0xd3]); // cmp r11, r10
        c.extend_from_slice(&[0x73, 0]); // jae done (patched below)
        c.len() - 1
    });
    c.extend_from_slice(&[0x41, 0x80, 0x3b, 0x00]); // cmp byte [r11], 0
    c.extend_from_slice(&[0x74, 0x05]); // je nul (over inc and jmp)
    c.extend_from_slice(&[0x49, 0xff, 0xc3]); // inc r11
    let back = next as i64 - (c.len() as i64 + 2);
    c.extend_from_slice(&[0xeb, back as i8 as u8]); // jmp next
    c.extend_from_slice(&[0x49, 0xff, 0xc3]); // nul: inc r11
    if let Some(at) = jae {
        c[at] = u8::try_from(c.len() - (at + 1)).expect("short"); // done
    }
    c.extend_from_slice(&[0x49, 0x29, modrm]); // done: sub r11, src
}

/// `mov reg, qword [operand of insn]`, the operand as the instruction has it (segment
/// included; a RIP-relative one by its absolute target, re-encoded where it is placed).
fn load_operand(insn: &Instruction, reg: Register) -> Result<Instruction, Unpatchable> {
    let base = insn.memory_base();
    let index = insn.memory_index();
    let narrow = base.size() == 4 || index.size() == 4;
    let displacement = insn.memory_displacement64() as i64;
    // As iced wants it: a RIP-relative operand by its target; otherwise 0, 1, or 4 (32-bit
    // addressing) or 8 (64-bit addressing) for a disp32.
    let displ_size = match displacement {
        _ if base == Register::RIP || base == Register::None => 8,
        0 => 0,
        d if i8::try_from(d).is_ok() => 1,
        _ if narrow => 4,
        _ => 8,
    };
    let displacement = if narrow {
        displacement as i32 as i64
    } else {
        displacement
    };
    let segment = match insn.segment_prefix() {
        Register::FS => Register::FS,
        _ => Register::None,
    };
    let operand = MemoryOperand::new(
        base,
        index,
        insn.memory_index_scale(),
        displacement,
        displ_size,
        false,
        segment,
    );
    Instruction::with2(Code::Mov_r64_rm64, reg, operand)
        .map_err(|e| Unpatchable::Encode(e.to_string()))
}

/// Where a memory function's entry is hooked: the site's address and length, the GOT slot
/// it goes through, and, for a call site, the return address to push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntrySite {
    /// The site (a PLT stub's start, or a `call`/`jmp` through the GOT).
    pub at: u64,
    /// Bytes the jump to the trampoline replaces (at least 5).
    pub len: u8,
    /// The GOT slot holding the function's address.
    pub got: u64,
    /// For a call through the GOT: the address after it (pushed as the return address);
    /// None at a PLT stub or a tail jump, where `[rsp]` already is the return address.
    pub ret: Option<u64>,
    /// The function reads a string: its length is measured at the entry and logged.
    pub measure: Option<Measure>,
}

/// The string a function reads (strlen, strcpy, strncpy), measured by the code at its
/// entry: the bytes read, its NUL included, up to a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measure {
    /// The string is the second argument (rsi), not the first (rdi).
    pub second: bool,
    /// At most the third argument (rdx) bytes are read.
    pub bounded: bool,
}

/// The trampoline logging a call of a modelled memory function at `e`, recording site id
/// `site`, placed at `at`, logging into `log`:
///
/// ```text
///   mov [scratch_rax], rax
///   mov rax, [cursor]
///   cmp rax, -48                 room for three records?   (flags are dead at a call)
///   jg full
///   mov [rax+end], rdi
///   mov qword [rax+end+8], site
///   mov [rax+end+16], rsi
///   mov [rax+end+24], rdx
///   mov r11, [rsp]  |  movabs r11, ret     the caller (r11 is dead at a call)
///   mov [rax+end+32], r11
///   mov [rax+end+40], rcx        (or, for a string function, the string's length with its
///                                NUL, counted here in r11/r10, dead at a call too)
///   lea rax, [rax+48]
///   mov [cursor], rax            committed
///   mov rax, [scratch_rax]
///   (movabs r11, ret; push r11)  a call site: the call's return address
/// back:
///   movabs r11, got
///   jmp [r11]                    into the function (or the lazy binder), as the stub would
/// full:
///   int3                         the tracer drains the log, records the call, and resumes
///                                at `committed`
/// ```
pub fn generate_entry(e: &EntrySite, site: u32, at: u64, log: &LogLayout) -> Trampoline {
    let end = log.end() as u32;
    let room = (CALL_RECORDS * RECORD_BYTES) as u8;
    let mut c = Vec::with_capacity(MAX_TRAMPOLINE as usize);
    abs32(&mut c, &[0x48, 0x89, 0x04, 0x25], log.scratch_rax()); // mov [scratch_rax], rax
    abs32(&mut c, &[0x48, 0x8b, 0x04, 0x25], log.cursor()); // mov rax, [cursor]
    c.extend_from_slice(&[0x48, 0x83, 0xf8, room.wrapping_neg()]); // cmp rax, -48
    let jg = c.len();
    c.extend_from_slice(&[0x7f, 0]); // jg full (patched below)
    let at_end = |c: &mut Vec<u8>, op: &[u8], off: u32| {
        c.extend_from_slice(op);
        c.extend_from_slice(&(end + off).to_le_bytes());
    };
    at_end(&mut c, &[0x48, 0x89, 0xb8], 0); // mov [rax+end], rdi
    at_end(&mut c, &[0x48, 0xc7, 0x80], 8); // mov qword [rax+end+8], site
    c.extend_from_slice(&site.to_le_bytes());
    at_end(&mut c, &[0x48, 0x89, 0xb0], 16); // mov [rax+end+16], rsi
    at_end(&mut c, &[0x48, 0x89, 0x90], 24); // mov [rax+end+24], rdx
    match e.ret {
        None => c.extend_from_slice(&[0x4c, 0x8b, 0x1c, 0x24]), // mov r11, [rsp]
        Some(ret) => {
            c.extend_from_slice(&[0x49, 0xbb]); // movabs r11, ret
            c.extend_from_slice(&ret.to_le_bytes());
        }
    }
    at_end(&mut c, &[0x4c, 0x89, 0x98], 32); // mov [rax+end+32], r11
    match e.measure {
        None => at_end(&mut c, &[0x48, 0x89, 0x88], 40), // mov [rax+end+40], rcx
        Some(m) => {
            measure_string(&mut c, m);
            at_end(&mut c, &[0x4c, 0x89, 0x98], 40); // mov [rax+end+40], r11
        }
    }
    c.extend_from_slice(&[0x48, 0x8d, 0x40, room]); // lea rax, [rax+48]
    abs32(&mut c, &[0x48, 0x89, 0x04, 0x25], log.cursor()); // mov [cursor], rax
    let committed = c.len();
    abs32(&mut c, &[0x48, 0x8b, 0x04, 0x25], log.scratch_rax()); // mov rax, [scratch_rax]
    if let Some(ret) = e.ret {
        c.extend_from_slice(&[0x49, 0xbb]); // movabs r11, ret
        c.extend_from_slice(&ret.to_le_bytes());
        c.extend_from_slice(&[0x41, 0x53]); // push r11
    }
    let back = c.len();
    c.extend_from_slice(&[0x49, 0xbb]); // movabs r11, got
    c.extend_from_slice(&e.got.to_le_bytes());
    c.extend_from_slice(&[0x41, 0xff, 0x23]); // jmp [r11]
    let full = c.len();
    c.push(0xcc);
    c[jg + 1] = u8::try_from(full - (jg + 2)).expect("jg reaches the int3");
    debug_assert!(c.len() as u64 <= MAX_TRAMPOLINE);
    let meta = TrampolineMeta {
        site: e.at,
        site_len: e.len,
        at,
        len: c.len() as u16,
        resume: committed as u16,
        committed: committed as u16,
        insn: committed as u16,
        back: back as u16,
        full: full as u16,
        kind: Kind::Entry {
            records: CALL_RECORDS as u8,
            pushes: e.ret.is_some(),
        },
    };
    Trampoline { bytes: c, meta }
}

/// Whether `insn` can run from a trampoline that only relocates it (an instruction moved
/// out of the way of a neighbour's jump): anything that goes on to the next instruction,
/// but system calls and interrupts (their address matters to the tracer).
pub fn check_relocatable(insn: &Instruction) -> Result<(), Unpatchable> {
    if insn.flow_control() != FlowControl::Next || insn.is_invalid() {
        return Err(Unpatchable::Branch);
    }
    Ok(())
}

/// A trampoline that runs `insn` (decoded at its runtime address, original `bytes`),
/// relocated to `at`, and jumps back after it.
pub fn generate_plain(
    insn: &Instruction,
    bytes: &[u8],
    at: u64,
) -> Result<Trampoline, Unpatchable> {
    check_relocatable(insn)?;
    let mut c = Vec::with_capacity(24);
    relocate(&mut c, insn, bytes, at)?;
    let back = c.len();
    let rel = insn.next_ip().wrapping_sub(at + back as u64 + 5) as i64;
    let rel = i32::try_from(rel).map_err(|_| Unpatchable::OutOfReach)?;
    c.push(0xe9);
    c.extend_from_slice(&rel.to_le_bytes());
    let meta = TrampolineMeta {
        site: insn.ip(),
        site_len: insn.len() as u8,
        at,
        len: c.len() as u16,
        resume: 0,
        committed: 0,
        insn: 0,
        back: back as u16,
        full: c.len() as u16,
        kind: Kind::Plain,
    };
    Ok(Trampoline { bytes: c, meta })
}

/// Appends `prefix` (an instruction whose ModRM/SIB select an absolute disp32) and `addr`.
pub(super) fn abs32(c: &mut Vec<u8>, prefix: &[u8], addr: u64) {
    debug_assert!(addr < 0x8000_0000);
    c.extend_from_slice(prefix);
    c.extend_from_slice(&(addr as u32).to_le_bytes());
}

/// Appends code leaving the effective address of `insn`'s memory operand in rax (and
/// changing rcx, already saved, for an fs-relative operand). `at` is the trampoline's
/// address (the encoder wants one).
fn effective_address(c: &mut Vec<u8>, insn: &Instruction, at: u64) -> Result<(), Unpatchable> {
    let base = insn.memory_base();
    let index = insn.memory_index();
    if base == Register::RIP || base == Register::EIP {
        // A fixed address: mov rax, imm64.
        c.extend_from_slice(&[0x48, 0xb8]);
        c.extend_from_slice(&insn.ip_rel_memory_address().to_le_bytes());
    } else if base == Register::None && index == Register::None {
        c.extend_from_slice(&[0x48, 0xb8]);
        c.extend_from_slice(&insn.memory_displacement64().to_le_bytes());
    } else {
        let narrow = base.size() == 4 || index.size() == 4;
        let displacement = insn.memory_displacement64() as i64;
        let displacement = if narrow {
            displacement as i32 as i64
        } else {
            displacement
        };
        let displ_size = match displacement {
            0 => 0,
            d if i8::try_from(d).is_ok() => 1,
            _ if narrow => 4,
            _ => 8,
        };
        let operand = MemoryOperand::new(
            base,
            index,
            insn.memory_index_scale(),
            displacement,
            displ_size,
            false,
            Register::None,
        );
        let lea = Instruction::with2(Code::Lea_r64_m, Register::RAX, operand)
            .map_err(|e| Unpatchable::Encode(e.to_string()))?;
        encode(c, &lea, at + c.len() as u64)?;
    }
    if insn.memory_segment() == Register::FS {
        // mov rcx, fs:[0] (the thread pointer, by the x86-64 TLS ABI); lea rax, [rax+rcx].
        c.extend_from_slice(&[0x64, 0x48, 0x8b, 0x0c, 0x25, 0, 0, 0, 0]);
        c.extend_from_slice(&[0x48, 0x8d, 0x04, 0x08]);
    }
    Ok(())
}

/// Appends the original instruction, moved to `ip`: its bytes as they are, or re-encoded
/// when it has a RIP-relative operand.
fn relocate(c: &mut Vec<u8>, insn: &Instruction, bytes: &[u8], ip: u64) -> Result<(), Unpatchable> {
    if insn.is_ip_rel_memory_operand() {
        let target = insn.ip_rel_memory_address() as i64;
        let reach = target.wrapping_sub(ip as i64 + insn.len() as i64);
        if i32::try_from(reach).is_err() {
            return Err(Unpatchable::OutOfReach);
        }
        encode(c, insn, ip)
    } else {
        c.extend_from_slice(&bytes[..insn.len()]);
        Ok(())
    }
}

/// Appends `insn` encoded at `ip`.
fn encode(c: &mut Vec<u8>, insn: &Instruction, ip: u64) -> Result<(), Unpatchable> {
    let mut e = Encoder::new(64);
    e.encode(insn, ip)
        .map_err(|err| Unpatchable::Encode(err.to_string()))?;
    c.extend_from_slice(&e.take_buffer());
    Ok(())
}

impl TrampolineMeta {
    /// Whether `rip` lies inside this trampoline.
    pub fn contains(&self, rip: u64) -> bool {
        rip >= self.at && rip < self.at + self.len as u64
    }

    /// How to leave the trampoline for a thread stopped at `rip` inside it (before the
    /// instruction at `rip` runs).
    pub fn exit_at(&self, rip: u64) -> Exit {
        let o = rip.wrapping_sub(self.at) as u16;
        match self.kind {
            Kind::Entry { records, pushes } => {
                // Offset 0 saves rax; from `committed` to the jump the records are in.
                let inside = o < self.full;
                return Exit::BeforeEntry {
                    restore_rax: o >= 8,
                    uncommit: if inside && o >= self.committed {
                        records
                    } else {
                        0
                    },
                    unpush: pushes && inside && o >= self.back,
                };
            }
            Kind::Wrapper { pushes } => return super::wrapper::exit(self, o, pushes),
            Kind::Call if o == self.back => return Exit::AfterCall,
            Kind::Access | Kind::Plain if o == self.back => return Exit::AfterInsn,
            Kind::Plain => {
                return Exit::BeforeInsn {
                    restore_rax: false,
                    restore_rcx: false,
                    uncommit: false,
                }
            }
            Kind::Access | Kind::Call => {}
        }
        // Offsets 0 and 8 are the two saves: rax is saved by the first, rcx by the second.
        // An emulated call's record stays committed up to its final jump.
        let last = if self.kind == Kind::Call {
            self.back - 1
        } else {
            self.insn
        };
        Exit::BeforeInsn {
            restore_rax: o >= 8,
            restore_rcx: o >= 16,
            uncommit: o >= self.committed && o <= last,
        }
    }

    /// The address a drained full log resumes at.
    pub fn resume_address(&self) -> u64 {
        self.at + self.resume as u64
    }

    /// The address of the full-log `int3`.
    pub fn full_address(&self) -> u64 {
        self.at + self.full as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::testing::{decode_all, decode_one as one};
    use iced_x86::Mnemonic;

    fn layout() -> LogLayout {
        LogLayout::new(0x7000_0000, 1024).unwrap()
    }

    #[test]
    fn a_plain_load_is_logged_then_run_then_left() {
        // mov eax, [rdi+8] at 0x401000
        let site = [0x8b, 0x47, 0x08];
        let insn = one(&site, 0x401000);
        let t = generate(&insn, &site, 7, 0x500000, &layout()).unwrap();
        let code = decode_all(&t.bytes, 0x500000);
        let mnemonics: Vec<Mnemonic> = code.iter().map(|i| i.mnemonic()).collect();
        use Mnemonic::*;
        assert_eq!(
            mnemonics,
            [Mov, Mov, Lea, Mov, Jrcxz, Mov, Mov, Lea, Mov, Mov, Mov, Mov, Jmp, Int3]
        );
        // The effective address is computed from the original registers.
        assert_eq!(code[2].memory_base(), Register::RDI);
        assert_eq!(code[2].memory_displacement64(), 8);
        // The original instruction, unchanged, then back after the site.
        assert_eq!(&t.bytes[t.meta.insn as usize..t.meta.back as usize], &site);
        assert_eq!(code[12].near_branch_target(), 0x401003);
        assert_eq!(code[4].near_branch_target(), t.meta.full_address());
        assert_eq!(code[5].ip(), t.meta.resume_address());
        // The record goes to end + cursor, the site id right after.
        assert_eq!(code[5].memory_displacement64(), layout().end());
        assert_eq!(code[6].immediate32(), 7);
        assert!(t.bytes.len() as u64 <= MAX_TRAMPOLINE);
    }

    #[test]
    fn a_rip_relative_store_is_re_encoded_for_its_new_place() {
        // mov dword [rip+0x2000], 5 at 0x401000 (10 bytes)
        let site = [0xc7, 0x05, 0x00, 0x20, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00];
        let insn = one(&site, 0x401000);
        let target = insn.ip_rel_memory_address();
        let t = generate(&insn, &site, 1, 0x500000, &layout()).unwrap();
        let code = decode_all(&t.bytes, 0x500000);
        // mov rax, imm64 with the absolute address.
        assert_eq!(code[2].immediate64(), target);
        let moved = code
            .iter()
            .find(|i| i.ip() == 0x500000 + t.meta.insn as u64)
            .unwrap();
        assert!(moved.is_ip_rel_memory_operand());
        assert_eq!(moved.ip_rel_memory_address(), target);
        assert_eq!(moved.immediate32(), 5);
    }

    #[test]
    fn an_fs_relative_operand_adds_the_thread_pointer() {
        // mov eax, fs:[rax+4]
        let site = [0x64, 0x8b, 0x40, 0x04];
        let insn = one(&site, 0x401000);
        let t = generate(&insn, &site, 1, 0x500000, &layout()).unwrap();
        let code = decode_all(&t.bytes, 0x500000);
        assert_eq!(code[3].memory_segment(), Register::FS);
        assert_eq!(code[4].mnemonic(), Mnemonic::Lea);
        assert_eq!(code[4].memory_index(), Register::RCX);
    }

    #[test]
    fn branches_and_gathers_are_left_alone() {
        // call qword [r11]: its target register is the one the emulation uses.
        assert_eq!(
            check(&one(&[0x41, 0xff, 0x13], 0x1000)),
            Err(Unpatchable::Branch)
        );
        // jmp qword [rip+0]
        assert_eq!(
            check(&one(&[0xff, 0x25, 0, 0, 0, 0], 0x1000)),
            Err(Unpatchable::Branch)
        );
        // mov eax, gs:[rax]
        assert_eq!(
            check(&one(&[0x65, 0x8b, 0x00], 0x1000)),
            Err(Unpatchable::GsSegment)
        );
        // vpgatherdd xmm0, [rax+xmm1*4], xmm2
        let gather = one(&[0xc4, 0xe2, 0x69, 0x90, 0x04, 0x88], 0x1000);
        assert_eq!(check(&gather), Err(Unpatchable::Vsib));
    }

    #[test]
    fn a_rip_relative_operand_out_of_reach_is_refused() {
        let site = [0x8b, 0x05, 0x00, 0x00, 0x00, 0x10]; // mov eax, [rip+0x10000000]
        let insn = one(&site, 0x7000_0000_0000);
        let far = 0x7000_0000_0000 - 0x7800_0000;
        assert_eq!(
            generate(&insn, &site, 1, far, &layout()),
            Err(Unpatchable::OutOfReach)
        );
    }

    #[test]
    fn a_thread_inside_is_moved_back_to_the_site_or_past_it() {
        let site = [0x8b, 0x47, 0x08];
        let insn = one(&site, 0x401000);
        let t = generate(&insn, &site, 7, 0x500000, &layout()).unwrap();
        let m = t.meta;
        let at = |o: u16| m.exit_at(m.at + o as u64);
        assert_eq!(
            at(0),
            Exit::BeforeInsn {
                restore_rax: false,
                restore_rcx: false,
                uncommit: false
            }
        );
        assert_eq!(
            at(8),
            Exit::BeforeInsn {
                restore_rax: true,
                restore_rcx: false,
                uncommit: false
            }
        );
        assert_eq!(
            at(m.resume),
            Exit::BeforeInsn {
                restore_rax: true,
                restore_rcx: true,
                uncommit: false
            }
        );
        assert_eq!(
            at(m.committed),
            Exit::BeforeInsn {
                restore_rax: true,
                restore_rcx: true,
                uncommit: true
            }
        );
        assert_eq!(
            at(m.insn),
            Exit::BeforeInsn {
                restore_rax: true,
                restore_rcx: true,
                uncommit: true
            }
        );
        assert_eq!(at(m.back), Exit::AfterInsn);
        assert_eq!(
            at(m.full),
            Exit::BeforeInsn {
                restore_rax: true,
                restore_rcx: true,
                uncommit: false
            }
        );
    }

    #[test]
    fn an_indirect_call_is_logged_then_made_with_the_original_return_address() {
        // call qword [rax+0xb8] at 0x50bab8 (6 bytes), as CPython's slot calls are.
        let site = [0xff, 0x90, 0xb8, 0x00, 0x00, 0x00];
        let insn = one(&site, 0x50bab8);
        assert_eq!(check(&insn), Ok(()));
        let log = layout();
        let t = generate(&insn, &site, 9, 0x600000, &log).unwrap();
        assert_eq!(t.meta.kind, Kind::Call);
        let code = decode_all(&t.bytes, 0x600000);
        let at = |o: u16| code.iter().find(|i| i.ip() == 0x600000 + o as u64).unwrap();
        // The pointer is read from the original registers into r11, kept in the slot.
        let load = at(t.meta.insn);
        assert_eq!(load.mnemonic(), Mnemonic::Mov);
        assert_eq!(load.op0_register(), Register::R11);
        assert_eq!(load.memory_base(), Register::RAX);
        assert_eq!(load.memory_displacement64(), 0xb8);
        let pushed: Vec<&Instruction> = code
            .iter()
            .filter(|i| i.ip() > load.ip() && i.ip() < 0x600000 + t.meta.back as u64)
            .collect();
        assert_eq!(pushed[0].memory_displacement64(), log.scratch_target());
        assert_eq!(pushed[1].immediate64(), 0x50bab8 + 6, "the return address");
        assert_eq!(pushed[2].mnemonic(), Mnemonic::Push);
        let jump = at(t.meta.back);
        assert_eq!(jump.mnemonic(), Mnemonic::Jmp);
        assert_eq!(jump.memory_displacement64(), log.scratch_target());
        // Stopped before the push it goes back to the site; at the jump, on to the target.
        assert_eq!(
            t.meta.exit_at(0x600000 + t.meta.back as u64),
            Exit::AfterCall
        );
        assert_eq!(
            t.meta.exit_at(0x600000 + t.meta.insn as u64),
            Exit::BeforeInsn {
                restore_rax: true,
                restore_rcx: true,
                uncommit: true
            }
        );
        assert_eq!(
            t.meta.exit_at(0x600000 + t.meta.full as u64),
            Exit::BeforeInsn {
                restore_rax: true,
                restore_rcx: true,
                uncommit: false
            }
        );
    }

    #[test]
    fn a_memory_function_entry_logs_its_arguments_and_caller() {
        let log = layout();
        for (ret, pushes) in [(None, false), (Some(0x401006u64), true)] {
            let e = EntrySite {
                at: 0x401000,
                len: 6,
                got: 0x404018,
                ret,
                measure: None,
            };
            let t = generate_entry(&e, 11, 0x600000, &log);
            let code = decode_all(&t.bytes, 0x600000);
            assert!(code.iter().all(|i| !i.is_invalid()));
            use Mnemonic::*;
            let mnemonics: Vec<Mnemonic> = code.iter().map(|i| i.mnemonic()).collect();
            let mut expected = vec![
                Mov, Mov, Cmp, Jg, Mov, Mov, Mov, Mov, Mov, Mov, Mov, Lea, Mov, Mov,
            ];
            if pushes {
                expected.extend([Mov, Push]);
            }
            expected.extend([Mov, Jmp, Int3]);
            assert_eq!(mnemonics, expected);
            // Room for the three records, else the int3.
            assert_eq!(code[2].immediate8to64(), -48);
            assert_eq!(code[3].near_branch_target(), t.meta.full_address());
            // The arguments and the caller go to end + cursor, in this order.
            let stores = [
                (4, 0, Register::RDI),
                (6, 16, Register::RSI),
                (7, 24, Register::RDX),
            ];
            for (k, off, reg) in stores
                .into_iter()
                .chain([(9, 32, Register::R11), (10, 40, Register::RCX)])
            {
                assert_eq!(
                    code[k].memory_displacement64(),
                    log.end() + off,
                    "store {k}"
                );
                assert_eq!(code[k].op1_register(), reg, "store {k}");
            }
            assert_eq!(code[5].memory_displacement64(), log.end() + 8);
            assert_eq!(code[5].immediate32(), 11);
            match ret {
                None => assert_eq!(code[8].memory_base(), Register::RSP),
                Some(r) => assert_eq!(code[8].immediate64(), r),
            }
            // Through the GOT slot, as the stub would.
            let n = code.len();
            assert_eq!(code[n - 3].immediate64(), 0x404018);
            assert_eq!(code[n - 2].memory_base(), Register::R11);
            // Leaving it: before the records, rax only; after, the records go back too, and
            // the pushed return address.
            let m = t.meta;
            assert_eq!(
                m.exit_at(m.at + 8),
                Exit::BeforeEntry {
                    restore_rax: true,
                    uncommit: 0,
                    unpush: false
                }
            );
            assert_eq!(
                m.exit_at(m.at + m.back as u64),
                Exit::BeforeEntry {
                    restore_rax: true,
                    uncommit: 3,
                    unpush: pushes
                }
            );
            assert_eq!(
                m.exit_at(m.full_address()),
                Exit::BeforeEntry {
                    restore_rax: true,
                    uncommit: 0,
                    unpush: false
                }
            );
        }
    }

    #[test]
    fn a_string_function_entry_measures_its_string() {
        let log = layout();
        for (m, src) in [
            (
                Measure {
                    second: false,
                    bounded: false,
                },
                Register::RDI,
            ),
            (
                Measure {
                    second: true,
                    bounded: false,
                },
                Register::RSI,
            ),
            (
                Measure {
                    second: true,
                    bounded: true,
                },
                Register::RSI,
            ),
        ] {
            let e = EntrySite {
                at: 0x401000,
                len: 6,
                got: 0x404018,
                ret: None,
                measure: Some(m),
            };
            let t = generate_entry(&e, 5, 0x600000, &log);
            assert!(t.bytes.len() as u64 <= MAX_TRAMPOLINE);
            let code = decode_all(&t.bytes, 0x600000);
            assert!(code.iter().all(|i| !i.is_invalid()));
            use Mnemonic::*;
            // r11 starts at the string, walks to its NUL (or the bound in r10), and ends as
            // the count of bytes read; the count goes to the third record.
            let start = code
                .iter()
                .position(|i| {
                    i.mnemonic() == Mov
                        && i.op0_register() == Register::R11
                        && i.op1_register() == src
                })
                .expect("mov r11, src");
            let walk: Vec<Mnemonic> = code[start..]
                .iter()
                .map(|i| i.mnemonic())
                .take_while(|&x| x != Sub)
                .collect();
            let expected: &[Mnemonic] = if m.bounded {
                &[Mov, Lea, Cmp, Jae, Cmp, Je, Inc, Jmp, Inc]
            } else {
                &[Mov, Cmp, Je, Inc, Jmp, Inc]
            };
            assert_eq!(walk, expected);
            let sub = &code[start + walk.len()];
            assert_eq!(
                (sub.op0_register(), sub.op1_register()),
                (Register::R11, src)
            );
            let store = &code[start + walk.len() + 1];
            assert_eq!(store.memory_displacement64(), log.end() + 40);
            assert_eq!(store.op1_register(), Register::R11);
            // The loop jumps back to its compare; je lands on the final inc; jae on the sub.
            let at = |k: usize| code[start + k].ip();
            let jmp = code[start..]
                .iter()
                .find(|i| i.mnemonic() == Jmp && i.near_branch_target() < i.ip())
                .unwrap();
            assert_eq!(jmp.near_branch_target(), at(if m.bounded { 2 } else { 1 }));
            let je = code[start..].iter().find(|i| i.mnemonic() == Je).unwrap();
            assert_eq!(je.near_branch_target(), at(walk.len() - 1));
            if m.bounded {
                assert_eq!(code[start + 3].near_branch_target(), sub.ip());
            }
        }
    }
}
