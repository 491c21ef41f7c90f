//! Test helpers for the patch layer: decoding the machine code it writes.

use iced_x86::{Decoder, DecoderOptions, Instruction};

/// Every instruction of `bytes`, decoded as 64-bit code loaded at `ip`.
pub fn decode_all(bytes: &[u8], ip: u64) -> Vec<Instruction> {
    Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE)
        .into_iter()
        .collect()
}

/// The first instruction of `bytes`, decoded as 64-bit code loaded at `ip`.
pub fn decode_one(bytes: &[u8], ip: u64) -> Instruction {
    Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE).decode()
}
