//! Linear-sweep decoding of x86-64 code (iced-x86), shared by the instruction scanners
//! ([`super::atomics`], [`super::accesses`]).
//!
//! A linear sweep decodes a section from its first byte to its last, one instruction after
//! the other. It is cheap and sees every instruction a compiler emitted; data embedded in
//! code (rare on x86-64 with GCC, Clang and rustc) may decode as bogus instructions.

use iced_x86::{Decoder, DecoderOptions, Instruction};

/// Decodes `bytes` (mapped at svma `svma`) as 64-bit code and calls `visit` on each valid
/// instruction, in address order. Undecodable bytes are skipped one at a time.
pub(crate) fn for_each_instruction(svma: u64, bytes: &[u8], mut visit: impl FnMut(&Instruction)) {
    let mut decoder = Decoder::with_ip(64, bytes, svma, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    while decoder.can_decode() {
        let pos = decoder.position();
        decoder.decode_out(&mut insn);
        if insn.is_invalid() {
            // Resynchronise one byte further on.
            let next = pos + 1;
            if next >= bytes.len() || decoder.set_position(next).is_err() {
                break;
            }
            decoder.set_ip(svma + next as u64);
            continue;
        }
        visit(&insn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resynchronises_after_garbage() {
        // nop ; (invalid 0x06 in 64-bit mode) ; ret
        let bytes = [0x90, 0x06, 0xc3];
        let mut seen = Vec::new();
        for_each_instruction(0x2000, &bytes, |i| seen.push(i.ip()));
        assert_eq!(seen, vec![0x2000, 0x2002]);
    }
}
