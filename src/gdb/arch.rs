//! The register file gdb is shown: x86-64 with gdb's Linux and segment-base features, so
//! that `orig_rax`, `fs_base` (thread-local variables, `errno`) and `gs_base` are there.
//! gdbstub_arch's x86-64 description has no `fs_base`, hence this one. The order of the
//! registers in the description is the order of the `g` packet.

use std::fmt::Write as _;
use std::num::NonZeroUsize;
use std::sync::OnceLock;

use gdbstub::arch::{Arch, RegId, Registers};

/// x86-64 Linux as gdb's `amd64-linux` target describes it.
pub enum X86_64Linux {}

/// General-purpose register names in gdb's order.
const GPRS: [&str; 16] = [
    "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];
const SEGMENTS: [&str; 6] = ["cs", "ss", "ds", "es", "fs", "gs"];
const FPU: [&str; 8] = [
    "fctrl", "fstat", "ftag", "fiseg", "fioff", "foseg", "fooff", "fop",
];

/// Every register gdb sees, in description order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Regs {
    /// rax, rbx, rcx, rdx, rsi, rdi, rbp, rsp, r8..r15.
    pub gpr: [u64; 16],
    /// Instruction pointer.
    pub rip: u64,
    /// Flags.
    pub eflags: u32,
    /// cs, ss, ds, es, fs, gs.
    pub segments: [u32; 6],
    /// st0..st7 (80-bit).
    pub st: [[u8; 10]; 8],
    /// fctrl, fstat, ftag, fiseg, fioff, foseg, fooff, fop.
    pub fpu: [u32; 8],
    /// xmm0..xmm15.
    pub xmm: [u128; 16],
    /// SSE control and status.
    pub mxcsr: u32,
    /// The system call number at a syscall stop (-1 elsewhere).
    pub orig_rax: u64,
    /// The thread pointer.
    pub fs_base: u64,
    /// The gs segment base.
    pub gs_base: u64,
}

impl Regs {
    /// The registers of a thread, from ptrace's general and x87/SSE sets.
    pub fn from_ptrace(r: &libc::user_regs_struct, fp: Option<&libc::user_fpregs_struct>) -> Self {
        let mut g = Regs {
            gpr: [
                r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8, r.r9, r.r10, r.r11,
                r.r12, r.r13, r.r14, r.r15,
            ],
            rip: r.rip,
            eflags: r.eflags as u32,
            segments: [r.cs, r.ss, r.ds, r.es, r.fs, r.gs].map(|s| s as u32),
            orig_rax: r.orig_rax,
            fs_base: r.fs_base,
            gs_base: r.gs_base,
            ..Default::default()
        };
        if let Some(fp) = fp {
            for (i, st) in g.st.iter_mut().enumerate() {
                let words = &fp.st_space[i * 4..i * 4 + 4];
                let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
                st.copy_from_slice(&bytes[..10]);
            }
            // The FXSAVE tag word is abridged: one bit per register, set when valid.
            let mut ftag = 0u32;
            for i in 0..8 {
                if fp.ftw & (1 << i) == 0 {
                    ftag |= 3 << (2 * i);
                }
            }
            g.fpu = [
                fp.cwd as u32,
                fp.swd as u32,
                ftag,
                0,
                fp.rip as u32,
                0,
                fp.rdp as u32,
                fp.fop as u32,
            ];
            for (i, x) in g.xmm.iter_mut().enumerate() {
                let w = &fp.xmm_space[i * 4..i * 4 + 4];
                *x = w
                    .iter()
                    .rev()
                    .fold(0u128, |acc, &word| (acc << 32) | word as u128);
            }
            g.mxcsr = fp.mxcsr;
        }
        g
    }

    /// Writes the general-purpose part back into ptrace's register set.
    pub fn to_ptrace(&self, r: &mut libc::user_regs_struct) {
        let g = &self.gpr;
        (r.rax, r.rbx, r.rcx, r.rdx) = (g[0], g[1], g[2], g[3]);
        (r.rsi, r.rdi, r.rbp, r.rsp) = (g[4], g[5], g[6], g[7]);
        (r.r8, r.r9, r.r10, r.r11) = (g[8], g[9], g[10], g[11]);
        (r.r12, r.r13, r.r14, r.r15) = (g[12], g[13], g[14], g[15]);
        r.rip = self.rip;
        r.eflags = self.eflags as u64;
        r.orig_rax = self.orig_rax;
    }
}

impl Registers for Regs {
    type ProgramCounter = u64;

    fn pc(&self) -> u64 {
        self.rip
    }

    fn gdb_serialize(&self, mut write_byte: impl FnMut(Option<u8>)) {
        let mut put = |bytes: &[u8]| bytes.iter().for_each(|b| write_byte(Some(*b)));
        self.gpr.iter().for_each(|r| put(&r.to_le_bytes()));
        put(&self.rip.to_le_bytes());
        put(&self.eflags.to_le_bytes());
        self.segments.iter().for_each(|s| put(&s.to_le_bytes()));
        self.st.iter().for_each(|s| put(s));
        self.fpu.iter().for_each(|f| put(&f.to_le_bytes()));
        self.xmm.iter().for_each(|x| put(&x.to_le_bytes()));
        put(&self.mxcsr.to_le_bytes());
        put(&self.orig_rax.to_le_bytes());
        put(&self.fs_base.to_le_bytes());
        put(&self.gs_base.to_le_bytes());
    }

    fn gdb_deserialize(&mut self, bytes: &[u8]) -> Result<(), ()> {
        let mut at = 0usize;
        let mut take = |n: usize| -> Result<&[u8], ()> {
            let s = bytes.get(at..at + n).ok_or(())?;
            at += n;
            Ok(s)
        };
        let u64_of = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or([0; 8]));
        let u32_of = |s: &[u8]| u32::from_le_bytes(s.try_into().unwrap_or([0; 4]));
        for r in self.gpr.iter_mut() {
            *r = u64_of(take(8)?);
        }
        self.rip = u64_of(take(8)?);
        self.eflags = u32_of(take(4)?);
        for s in self.segments.iter_mut() {
            *s = u32_of(take(4)?);
        }
        for s in self.st.iter_mut() {
            s.copy_from_slice(take(10)?);
        }
        for f in self.fpu.iter_mut() {
            *f = u32_of(take(4)?);
        }
        for x in self.xmm.iter_mut() {
            *x = u128::from_le_bytes(take(16)?.try_into().map_err(|_| ())?);
        }
        self.mxcsr = u32_of(take(4)?);
        self.orig_rax = u64_of(take(8)?);
        self.fs_base = u64_of(take(8)?);
        self.gs_base = u64_of(take(8)?);
        Ok(())
    }
}

/// Registers are read and written as a whole (`g`/`G`); single-register access is not
/// offered, so no register has an id of its own.
#[derive(Debug)]
pub enum NoRegId {}

impl RegId for NoRegId {
    fn from_raw_id(_id: usize) -> Option<(Self, Option<NonZeroUsize>)> {
        None
    }
}

impl Arch for X86_64Linux {
    type Usize = u64;
    type Registers = Regs;
    type RegId = NoRegId;
    type BreakpointKind = usize;

    fn target_description_xml() -> Option<&'static str> {
        static XML: OnceLock<String> = OnceLock::new();
        Some(XML.get_or_init(description).as_str())
    }
}

/// The target description, registers in `g`-packet order.
fn description() -> String {
    let mut x = String::from(
        r#"<?xml version="1.0"?><!DOCTYPE target SYSTEM "gdb-target.dtd"><target version="1.0"><architecture>i386:x86-64</architecture><osabi>GNU/Linux</osabi><feature name="org.gnu.gdb.i386.core">"#,
    );
    let reg = |x: &mut String, name: &str, bits: u32, ty: &str, group: Option<&str>| {
        let group = group
            .map(|g| format!(r#" group="{g}""#))
            .unwrap_or_default();
        let _ = write!(
            x,
            r#"<reg name="{name}" bitsize="{bits}" type="{ty}"{group}/>"#
        );
    };
    for (i, r) in GPRS.iter().enumerate() {
        let ty = match i {
            6 | 7 => "data_ptr",
            _ => "int64",
        };
        reg(&mut x, r, 64, ty, None);
    }
    reg(&mut x, "rip", 64, "code_ptr", None);
    reg(&mut x, "eflags", 32, "int32", None);
    for s in SEGMENTS {
        reg(&mut x, s, 32, "int32", None);
    }
    for i in 0..8 {
        reg(&mut x, &format!("st{i}"), 80, "i387_ext", None);
    }
    for f in FPU {
        reg(&mut x, f, 32, "int", Some("float"));
    }
    x.push_str(r#"</feature><feature name="org.gnu.gdb.i386.sse">"#);
    for i in 0..16 {
        reg(&mut x, &format!("xmm{i}"), 128, "uint128", Some("vector"));
    }
    reg(&mut x, "mxcsr", 32, "int", Some("vector"));
    x.push_str(r#"</feature><feature name="org.gnu.gdb.i386.linux">"#);
    reg(&mut x, "orig_rax", 64, "int", Some("system"));
    x.push_str(r#"</feature><feature name="org.gnu.gdb.i386.segments">"#);
    reg(&mut x, "fs_base", 64, "int", None);
    reg(&mut x, "gs_base", 64, "int", None);
    x.push_str("</feature></target>");
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_round_trip_in_description_order() {
        let regs = Regs {
            gpr: std::array::from_fn(|i| i as u64 + 1),
            rip: 0x401000,
            eflags: 0x246,
            fs_base: 0x7fff_0000,
            xmm: std::array::from_fn(|i| (i as u128) << 70),
            ..Default::default()
        };
        let mut bytes = Vec::new();
        regs.gdb_serialize(|b| bytes.push(b.unwrap_or(0)));
        // 16*8 + 8 + 4 + 6*4 + 8*10 + 8*4 + 16*16 + 4 + 3*8
        assert_eq!(bytes.len(), 560);
        let mut back = Regs::default();
        back.gdb_deserialize(&bytes).unwrap();
        assert_eq!(back, regs);
        let xml = description();
        assert_eq!(xml.matches("<reg ").count(), 60);
        assert!(xml.contains(r#"name="fs_base""#));
    }
}
