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

use iced_x86::{Code, Encoder, FlowControl, Instruction, MemoryOperand, OpKind, Register};

use super::log_layout::{LogLayout, RECORD_BYTES};

/// Most bytes a trampoline takes.
pub const MAX_TRAMPOLINE: u64 = 128;

/// Why an instruction is left to the breakpoint path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unpatchable {
    /// A branch, call or return that reads memory: relocating it would move a return
    /// address or a target into generated code.
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
    /// It records an access (else it only runs a relocated instruction: see
    /// [`generate_plain`]).
    pub logs: bool,
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
}

/// A generated trampoline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trampoline {
    /// Its code.
    pub bytes: Vec<u8>,
    /// Where its parts are.
    pub meta: TrampolineMeta,
}

/// Whether `insn` (decoded at its runtime address) can be moved into a trampoline.
pub fn check(insn: &Instruction) -> Result<(), Unpatchable> {
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
    relocate(&mut c, insn, bytes, at + insn_at as u64)?;
    let back = c.len();
    let after_site = insn.next_ip();
    let rel = after_site.wrapping_sub(at + back as u64 + 5) as i64;
    let rel = i32::try_from(rel).map_err(|_| Unpatchable::OutOfReach)?;
    c.push(0xe9);
    c.extend_from_slice(&rel.to_le_bytes());
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
        logs: true,
    };
    Ok(Trampoline { bytes: c, meta })
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
        logs: false,
    };
    Ok(Trampoline { bytes: c, meta })
}

/// Appends `prefix` (an instruction whose ModRM/SIB select an absolute disp32) and `addr`.
fn abs32(c: &mut Vec<u8>, prefix: &[u8], addr: u64) {
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
        if o == self.back {
            return Exit::AfterInsn;
        }
        if !self.logs {
            return Exit::BeforeInsn {
                restore_rax: false,
                restore_rcx: false,
                uncommit: false,
            };
        }
        // Offsets 0 and 8 are the two saves: rax is saved by the first, rcx by the second.
        Exit::BeforeInsn {
            restore_rax: o >= 8,
            restore_rcx: o >= 16,
            uncommit: o >= self.committed && o <= self.insn,
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
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};

    fn decode_all(bytes: &[u8], ip: u64) -> Vec<Instruction> {
        let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
        let mut out = Vec::new();
        while d.can_decode() {
            out.push(d.decode());
        }
        out
    }

    fn one(bytes: &[u8], ip: u64) -> Instruction {
        decode_all(bytes, ip)[0]
    }

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
        // call qword [rax]
        assert_eq!(check(&one(&[0xff, 0x10], 0x1000)), Err(Unpatchable::Branch));
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
}
