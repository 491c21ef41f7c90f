//! Where glibc keeps a thread's `errno`: the thread-pointer offset of its TLS slot,
//! found by decoding `__errno_location` (iced-x86).
//!
//! glibc's `__errno_location` computes `fs_base + tp_offset`; the offset is either loaded
//! from a GOT slot (initial-exec TLS in `libc.so.6`: `mov rax, [rip+X]; add rax, fs:[0]`)
//! or an immediate (local-exec TLS in static binaries: `mov rax, -0x48; add rax, fs:[0]`).
//! The errno address of a thread is then `fs_base + tp_offset`.

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};

use super::elf::ElfFile;

/// How to find the thread-pointer offset of `errno`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrnoTls {
    /// The svma of an 8-byte GOT slot holding the TP offset; it is filled in by the
    /// dynamic loader, so read it from the tracee's memory at `svma + bias`.
    GotSlot(u64),
    /// The TP offset itself (usually negative).
    Constant(i64),
}

/// What `rax` holds while symbolically executing `__errno_location`.
#[derive(Debug, Default)]
struct Rax {
    thread_pointer: bool,
    got: Option<u64>,
    constant: i64,
}

/// The most instructions decoded before giving up.
const MAX_INSNS: usize = 12;

/// Decodes `__errno_location` in `elf` and returns where its TP offset comes from, or
/// `None` when the function is absent or has an unknown shape.
pub fn errno_tls_offset_source(elf: &ElfFile) -> Option<ErrnoTls> {
    elf.function_addresses("__errno_location")
        .into_iter()
        .find_map(|svma| decode_at(elf, svma))
}

/// Symbolically executes the function at `svma` until `ret`.
fn decode_at(elf: &ElfFile, svma: u64) -> Option<ErrnoTls> {
    let bytes = (16..=64)
        .rev()
        .step_by(16)
        .find_map(|len| elf.read_svma(svma, len))?;
    let mut decoder = Decoder::with_ip(64, bytes, svma, DecoderOptions::NONE);
    let mut rax = Rax::default();
    let mut insn = Instruction::default();
    for _ in 0..MAX_INSNS {
        if !decoder.can_decode() {
            return None;
        }
        decoder.decode_out(&mut insn);
        if insn.mnemonic() == Mnemonic::Ret {
            return finish(&rax);
        }
        step(&insn, &mut rax)?;
    }
    None
}

/// Applies one instruction to `rax`; `None` for an instruction outside the known shapes.
fn step(insn: &Instruction, rax: &mut Rax) -> Option<()> {
    match insn.mnemonic() {
        Mnemonic::Endbr64 | Mnemonic::Nop => return Some(()),
        Mnemonic::Mov | Mnemonic::Add | Mnemonic::Lea => {}
        _ => return None,
    }
    if insn.op_count() != 2
        || insn.op_kind(0) != OpKind::Register
        || insn.op0_register() != Register::RAX
    {
        return None;
    }
    let is_mov = insn.mnemonic() == Mnemonic::Mov;
    if is_mov {
        *rax = Rax::default();
    }
    match insn.mnemonic() {
        Mnemonic::Lea => {
            if insn.memory_base() != Register::RAX || insn.memory_index() != Register::None {
                return None;
            }
            rax.constant = rax
                .constant
                .wrapping_add(insn.memory_displacement64() as i64);
        }
        _ => match insn.op_kind(1) {
            OpKind::Memory if is_thread_pointer(insn) => rax.thread_pointer = true,
            OpKind::Memory if insn.is_ip_rel_memory_operand() && rax.got.is_none() => {
                rax.got = Some(insn.ip_rel_memory_address());
            }
            OpKind::Immediate32to64 | OpKind::Immediate32 | OpKind::Immediate8to64 => {
                rax.constant = rax.constant.wrapping_add(insn.immediate(1) as i64);
            }
            _ => return None,
        },
    }
    Some(())
}

/// True for the memory operand `fs:[0]`, which holds the thread pointer itself.
fn is_thread_pointer(insn: &Instruction) -> bool {
    insn.segment_prefix() == Register::FS
        && insn.memory_base() == Register::None
        && insn.memory_index() == Register::None
        && insn.memory_displacement64() == 0
}

/// The result once `ret` is reached: rax must be the thread pointer plus one offset.
fn finish(rax: &Rax) -> Option<ErrnoTls> {
    if !rax.thread_pointer {
        return None;
    }
    match (rax.got, rax.constant) {
        (Some(slot), 0) => Some(ErrnoTls::GotSlot(slot)),
        (None, c) => Some(ErrnoTls::Constant(c)),
        (Some(_), _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::test_build::build;
    use std::path::Path;

    #[test]
    fn libc_uses_a_got_slot() {
        let libc = ElfFile::load(Path::new("/lib/x86_64-linux-gnu/libc.so.6")).unwrap();
        let Some(ErrnoTls::GotSlot(slot)) = errno_tls_offset_source(&libc) else {
            panic!("unexpected shape");
        };
        // The slot is inside the GOT.
        let got = libc.section(".got").unwrap();
        assert!(slot >= got.svma && slot < got.svma + got.size, "{slot:#x}");
    }

    #[test]
    fn static_binary_uses_a_constant() {
        let source = "#include <errno.h>\nint main(void) { errno = 3; return errno; }\n";
        let Some(exe) = build("errno", "gcc", &["-O2", "-static"], "e.c", source) else {
            eprintln!("gcc -static not available; skipping");
            return;
        };
        let elf = ElfFile::load(&exe).unwrap();
        let found = errno_tls_offset_source(&elf);
        assert!(
            matches!(found, Some(ErrnoTls::Constant(c)) if c < 0),
            "{found:?}"
        );
        let _ = std::fs::remove_dir_all(exe.parent().unwrap());
    }

    #[test]
    fn no_errno_location() {
        let t = ElfFile::load(Path::new("/bin/true")).unwrap();
        assert_eq!(errno_tls_offset_source(&t), None);
    }
}
