//! The code an allocator's hook jumps to when its result must be logged too: it calls the
//! allocator itself, so that it sees the returned pointer, and logs the call when it
//! returns. Each `malloc` of a program then costs a few instructions instead of two
//! ptrace stops (its entry and its return).
//!
//! ```text
//!   (movabs r11, ret; push r11)     a call site: the call's return address, as the call
//!   push rdi                        the three argument registers (restored to nobody: the
//!   push rsi                        allocator may change them, the caller may not rely on
//!   push rdx                        them); rsp is 16-byte aligned again for the call
//! call_at:
//!   movabs r11, got
//!   call [r11]                      the allocator (or the lazy binder), returning here
//! after:
//!   mov rcx, [cursor]               rcx, r11 and the flags are dead after a call
//!   cmp rcx, -48                    room for three records?
//!   jg full
//!   mov [rcx+end], rax              (result, site id)
//!   mov qword [rcx+end+8], site
//!   mov r11, [rsp+16]; mov [rcx+end+16], r11    (first argument, second argument)
//!   mov r11, [rsp+8];  mov [rcx+end+24], r11
//!   mov r11, [rsp+24]; mov [rcx+end+32], r11    (caller, third argument)
//!   mov r11, [rsp];    mov [rcx+end+40], r11
//!   lea rcx, [rcx+48]
//!   mov [cursor], rcx               committed
//! committed:
//!   add rsp, 24
//! ret_at:
//!   ret                             to the caller
//! full:
//!   int3                            the tracer drains the log, records the call from rax
//!                                   and the stack, and resumes at `committed`
//! ```
//!
//! The allocator's return address is inside this code, so only functions that never
//! unwind through their caller are wrapped (C's malloc family, not C++'s operator new),
//! and a wrapper's code is never reused while the process lives (a thread may be inside
//! the allocator). [`exit`] says how to move a thread stopped inside the wrapper itself.

use super::log_layout::{LogLayout, CALL_RECORDS, RECORD_BYTES};
use super::trampoline::{abs32, EntrySite, Exit, Kind, Trampoline, TrampolineMeta, MAX_TRAMPOLINE};

/// Bytes of `movabs r11, imm64`.
const MOVABS: u16 = 10;

/// The wrapper of the allocator hooked at `e`, recording site id `site`, placed at `at`,
/// logging into `log`.
pub fn generate_wrapper(e: &EntrySite, site: u32, at: u64, log: &LogLayout) -> Trampoline {
    let end = log.end() as u32;
    let room = (CALL_RECORDS * RECORD_BYTES) as u8;
    let mut c = Vec::with_capacity(MAX_TRAMPOLINE as usize);
    if let Some(ret) = e.ret {
        c.extend_from_slice(&[0x49, 0xbb]); // movabs r11, ret
        c.extend_from_slice(&ret.to_le_bytes());
        c.extend_from_slice(&[0x41, 0x53]); // push r11
    }
    c.extend_from_slice(&[0x57, 0x56, 0x52]); // push rdi; push rsi; push rdx
    let call_at = c.len();
    c.extend_from_slice(&[0x49, 0xbb]); // movabs r11, got
    c.extend_from_slice(&e.got.to_le_bytes());
    c.extend_from_slice(&[0x41, 0xff, 0x13]); // call [r11]
    let after = c.len();
    abs32(&mut c, &[0x48, 0x8b, 0x0c, 0x25], log.cursor()); // mov rcx, [cursor]
    c.extend_from_slice(&[0x48, 0x83, 0xf9, room.wrapping_neg()]); // cmp rcx, -48
    let jg = c.len();
    c.extend_from_slice(&[0x7f, 0]); // jg full (patched below)
    let at_end = |c: &mut Vec<u8>, op: &[u8], off: u32| {
        c.extend_from_slice(op);
        c.extend_from_slice(&(end + off).to_le_bytes());
    };
    at_end(&mut c, &[0x48, 0x89, 0x81], 0); // mov [rcx+end], rax
    at_end(&mut c, &[0x48, 0xc7, 0x81], 8); // mov qword [rcx+end+8], site
    c.extend_from_slice(&site.to_le_bytes());
    for (from_stack, off) in [(16u8, 16u32), (8, 24), (24, 32), (0, 40)] {
        if from_stack == 0 {
            c.extend_from_slice(&[0x4c, 0x8b, 0x1c, 0x24]); // mov r11, [rsp]
        } else {
            c.extend_from_slice(&[0x4c, 0x8b, 0x5c, 0x24, from_stack]); // mov r11, [rsp+d8]
        }
        at_end(&mut c, &[0x4c, 0x89, 0x99], off); // mov [rcx+end+off], r11
    }
    c.extend_from_slice(&[0x48, 0x8d, 0x49, room]); // lea rcx, [rcx+48]
    abs32(&mut c, &[0x48, 0x89, 0x0c, 0x25], log.cursor()); // mov [cursor], rcx
    let committed = c.len();
    c.extend_from_slice(&[0x48, 0x83, 0xc4, 0x18]); // add rsp, 24
    let ret_at = c.len();
    c.push(0xc3); // ret
    let full = c.len();
    c.push(0xcc);
    c[jg + 1] = u8::try_from(full - (jg + 2)).expect("jg reaches the int3");
    debug_assert!(c.len() as u64 <= MAX_TRAMPOLINE);
    let meta = TrampolineMeta {
        site: e.at,
        site_len: e.len,
        at,
        len: c.len() as u16,
        resume: after as u16,
        committed: committed as u16,
        insn: call_at as u16,
        back: ret_at as u16,
        full: full as u16,
        kind: Kind::Wrapper {
            pushes: e.ret.is_some(),
        },
    };
    Trampoline { bytes: c, meta }
}

/// How to leave wrapper `m` for a thread stopped at offset `o` inside it (before the
/// instruction there runs): before its call, back to the site with what it pushed popped;
/// once the allocator returned, on to the caller, the call recorded by the tracer unless
/// the code committed its records.
pub(super) fn exit(m: &TrampolineMeta, o: u16, pushes: bool) -> Exit {
    let first_push = if pushes { MOVABS } else { 0 };
    let call_at = m.insn;
    if o < call_at + MOVABS + 3 {
        // Each push is one byte (push r11 two, after its movabs).
        let ret_pushed = pushes && o >= MOVABS + 2;
        let args_pushed = o
            .saturating_sub(first_push + if pushes { 2 } else { 0 })
            .min(3);
        let args_pushed = if o >= call_at { 3 } else { args_pushed };
        return Exit::BeforeWrappedCall {
            unpush: args_pushed as u8 + ret_pushed as u8,
        };
    }
    Exit::AfterWrappedCall {
        logged: o == m.committed || o == m.back,
        args_popped: o == m.back,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::testing::decode_all;
    use iced_x86::{Mnemonic, Register};

    #[test]
    fn a_wrapper_calls_the_allocator_then_logs_its_result_arguments_and_caller() {
        let log = LogLayout::new(0x7000_0000, 1024).unwrap();
        for ret in [None, Some(0x401006u64)] {
            let e = EntrySite {
                at: 0x401000,
                len: 6,
                got: 0x404018,
                ret,
                measure: None,
            };
            let t = generate_wrapper(&e, 9, 0x600000, &log);
            let code = decode_all(&t.bytes, 0x600000);
            assert!(code.iter().all(|i| !i.is_invalid()));
            use Mnemonic::*;
            let mut expected = Vec::new();
            if ret.is_some() {
                expected.extend([Mov, Push]);
            }
            expected.extend([Push, Push, Push, Mov, Call, Mov, Cmp, Jg, Mov, Mov]);
            expected.extend([
                Mov, Mov, Mov, Mov, Mov, Mov, Mov, Mov, Lea, Mov, Add, Ret, Int3,
            ]);
            let mnemonics: Vec<Mnemonic> = code.iter().map(|i| i.mnemonic()).collect();
            assert_eq!(mnemonics, expected);
            let k = if ret.is_some() { 2 } else { 0 };
            // Three pushes and a call keep the allocator's stack aligned as at a call.
            assert_eq!(code[k + 3].immediate64(), 0x404018);
            assert_eq!(code[k + 4].memory_base(), Register::R11);
            assert_eq!(code[k + 4].ip(), 0x600000 + t.meta.insn as u64 + 10);
            // Room for three records, else the int3.
            assert_eq!(code[k + 6].immediate8to64(), -48);
            assert_eq!(code[k + 7].near_branch_target(), t.meta.full_address());
            // The result and the site id first, then the stacked arguments and the caller.
            assert_eq!(code[k + 8].op1_register(), Register::RAX);
            assert_eq!(code[k + 8].memory_displacement64(), log.end());
            assert_eq!(code[k + 9].immediate32(), 9);
            let loads: Vec<(u64, u64)> = (0..4)
                .map(|n| {
                    let load = code[k + 10 + 2 * n];
                    let store = code[k + 11 + 2 * n];
                    (
                        load.memory_displacement64(),
                        store.memory_displacement64() - log.end(),
                    )
                })
                .collect();
            assert_eq!(loads, [(16, 16), (8, 24), (24, 32), (0, 40)]);
            if let Some(r) = ret {
                assert_eq!(code[0].immediate64(), r);
            }
            // Leaving it.
            let m = t.meta;
            let before = |o: u16| m.exit_at(m.at + o as u64);
            assert_eq!(before(0), Exit::BeforeWrappedCall { unpush: 0 });
            assert_eq!(
                before(m.insn),
                Exit::BeforeWrappedCall {
                    unpush: 3 + ret.is_some() as u8
                }
            );
            assert_eq!(
                before(m.insn + 10),
                Exit::BeforeWrappedCall {
                    unpush: 3 + ret.is_some() as u8
                }
            );
            assert_eq!(
                before(m.insn - 2),
                Exit::BeforeWrappedCall {
                    unpush: 1 + ret.is_some() as u8
                }
            );
            assert_eq!(
                before(m.resume),
                Exit::AfterWrappedCall {
                    logged: false,
                    args_popped: false
                }
            );
            assert_eq!(
                before(m.full),
                Exit::AfterWrappedCall {
                    logged: false,
                    args_popped: false
                }
            );
            assert_eq!(
                before(m.committed),
                Exit::AfterWrappedCall {
                    logged: true,
                    args_popped: false
                }
            );
            assert_eq!(
                before(m.back),
                Exit::AfterWrappedCall {
                    logged: true,
                    args_popped: true
                }
            );
        }
    }
}
