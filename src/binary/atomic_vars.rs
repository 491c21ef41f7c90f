//! Where a program's atomic global and static variables live, from DWARF: accesses to
//! them are synchronisation, not data races, whatever instruction performs them.
//!
//! A variable counts when it has a fixed address (`DW_AT_location` is a single
//! `DW_OP_addr`/`DW_OP_addrx`; thread-locals are left out) and its type is, or contains as
//! struct/class/union members, base classes, Rust enum variants or array elements, an
//! atomic type: C11 `_Atomic` (`DW_TAG_atomic_type`), C++ `std::atomic<T>`,
//! `std::__atomic_base<T>`, `std::__atomic_float<T>`, `std::atomic_flag`,
//! `std::__atomic_flag_base`, or Rust `core::sync::atomic::{AtomicBool, AtomicI8, ...,
//! AtomicUsize, AtomicPtr<T>, Atomic<T>}`. Type names are matched with their namespace, so
//! a user's own `ns::atomic_flag` does not count.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::rc::Rc;

use gimli::{AttributeValue, DebugInfoOffset, EndianSlice, LittleEndian, Operation, UnitOffset};

use super::elf::ElfFile;
use super::elf_dwarf::{load_dwarf, merge, Dwarf};

/// A DWARF reader over the file's bytes.
type Reader<'a> = EndianSlice<'a, LittleEndian>;
/// A parsed compile unit.
type Unit<'a> = gimli::Unit<Reader<'a>>;
/// A debugging information entry.
type Die<'abbrev, 'unit, 'a> = gimli::DebuggingInformationEntry<'abbrev, 'unit, Reader<'a>>;

/// Array elements replicated at most, per array, when the element type is only partly
/// atomic (a struct with an atomic member); larger arrays keep their first elements only.
const MAX_REPLICATED_ELEMENTS: u64 = 1 << 16;

/// How deep type references are followed (guards against malformed, cyclic DWARF).
const MAX_TYPE_DEPTH: u32 = 64;

/// Rust's atomic integer and bool types, in `core::sync::atomic`.
const RUST_ATOMICS: &[&str] = &[
    "AtomicBool",
    "AtomicI8",
    "AtomicI16",
    "AtomicI32",
    "AtomicI64",
    "AtomicI128",
    "AtomicIsize",
    "AtomicU8",
    "AtomicU16",
    "AtomicU32",
    "AtomicU64",
    "AtomicU128",
    "AtomicUsize",
];

/// The svma ranges (sorted, merged) of the atomic global and static variables of `elf`,
/// or of their atomic parts (one range per atomic struct member, at its offset). Empty
/// without (uncompressed) DWARF.
pub fn atomic_global_ranges(elf: &ElfFile) -> Vec<Range<u64>> {
    let Some(dwarf) = load_dwarf(elf) else {
        return Vec::new();
    };
    let mut units = Vec::new();
    let mut headers = dwarf.units();
    while let Ok(Some(header)) = headers.next() {
        let Some(start) = header.offset().as_debug_info_offset() else {
            continue;
        };
        if let Ok(unit) = dwarf.unit(header) {
            units.push((start, unit));
        }
    }
    let mut types = Types {
        units: &units,
        atomic_named: HashSet::new(),
        memo: HashMap::new(),
    };
    let mut variables = Vec::new();
    for (_, unit) in &units {
        scan_unit(&dwarf, unit, &mut variables, &mut types.atomic_named);
    }
    let mut out = Vec::new();
    for (addr, ty) in variables {
        if let Some(layout) = types.layout(ty, 0) {
            out.extend(
                layout
                    .atomic
                    .iter()
                    .map(|r| addr.saturating_add(r.start)..addr.saturating_add(r.end)),
            );
        }
    }
    merge(out)
}

/// Walks all entries of `unit`: records the variables with a fixed address as (svma,
/// type), and the atomic structure types named in `std`/`core::sync::atomic`.
fn scan_unit<'a>(
    dwarf: &Dwarf<'a>,
    unit: &Unit<'a>,
    variables: &mut Vec<(u64, DebugInfoOffset)>,
    atomic_named: &mut HashSet<DebugInfoOffset>,
) {
    let mut cursor = unit.entries();
    let mut depth: isize = 0;
    // Enclosing namespaces as (depth, name).
    let mut namespaces: Vec<(isize, &'a [u8])> = Vec::new();
    while let Ok(Some((delta, entry))) = cursor.next_dfs() {
        depth += delta;
        while namespaces.last().is_some_and(|(d, _)| *d >= depth) {
            namespaces.pop();
        }
        let name = || -> Option<&'a [u8]> {
            let value = entry.attr_value(gimli::DW_AT_name).ok()??;
            Some(dwarf.attr_string(unit, value).ok()?.slice())
        };
        match entry.tag() {
            gimli::DW_TAG_namespace => namespaces.push((depth, name().unwrap_or_default())),
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type => {
                let path: Vec<&[u8]> = namespaces.iter().map(|(_, n)| *n).collect();
                if name().is_some_and(|n| is_atomic_type_name(&path, n)) {
                    if let Some(off) = entry.offset().to_debug_info_offset(&unit.header) {
                        atomic_named.insert(off);
                    }
                }
            }
            gimli::DW_TAG_variable => {
                if let Some(addr) = static_address(dwarf, unit, entry) {
                    if let Some(ty) = variable_type(unit, entry) {
                        variables.push((addr, ty));
                    }
                }
            }
            _ => {}
        }
    }
}

/// True for the names of atomic types inside the namespaces `path` (outermost first).
fn is_atomic_type_name(path: &[&[u8]], name: &[u8]) -> bool {
    let Ok(name) = std::str::from_utf8(name) else {
        return false;
    };
    match path {
        // libstdc++ (`std::`) and libc++ (`std::__1::`).
        [b"std", ..] => {
            name.starts_with("atomic<")
                || name.starts_with("__atomic_base<")
                || name.starts_with("__atomic_float<")
                || name == "atomic_flag"
                || name == "__atomic_flag_base"
        }
        [b"core", b"sync", b"atomic"] => {
            RUST_ATOMICS.contains(&name)
                || name.starts_with("AtomicPtr<")
                || name.starts_with("Atomic<")
        }
        _ => false,
    }
}

/// The fixed svma of a variable whose location is one `DW_OP_addr` (or `DW_OP_addrx`);
/// `None` for locals, thread-locals, declarations and variables the linker dropped.
fn static_address<'a>(dwarf: &Dwarf<'a>, unit: &Unit<'a>, entry: &Die<'_, '_, 'a>) -> Option<u64> {
    let AttributeValue::Exprloc(expr) = entry.attr_value(gimli::DW_AT_location).ok()?? else {
        return None;
    };
    let mut ops = expr.operations(unit.encoding());
    let address = match ops.next().ok()?? {
        Operation::Address { address } => address,
        Operation::AddressIndex { index } => dwarf.address(unit, index).ok()?,
        _ => return None,
    };
    if ops.next().ok()?.is_some() || address == 0 {
        return None;
    }
    Some(address)
}

/// A variable's `DW_AT_type`, possibly found on the declaration its definition points to
/// (`DW_AT_specification`, e.g. C++ static data members) or on its abstract origin.
fn variable_type(unit: &Unit<'_>, entry: &Die<'_, '_, '_>) -> Option<DebugInfoOffset> {
    if let Some(ty) = type_ref(unit, entry) {
        return Some(ty);
    }
    let mut target = None;
    for attr in [gimli::DW_AT_specification, gimli::DW_AT_abstract_origin] {
        if let Ok(Some(value)) = entry.attr_value(attr) {
            target = global_ref(unit, value);
            if target.is_some() {
                break;
            }
        }
    }
    let target = target?;
    // Declarations live in the same unit in practice; follow only those.
    let offset = target.to_unit_offset(&unit.header)?;
    let decl = unit.entry(offset).ok()?;
    type_ref(unit, &decl)
}

/// The entry's `DW_AT_type` as an offset in `.debug_info`.
fn type_ref(unit: &Unit<'_>, entry: &Die<'_, '_, '_>) -> Option<DebugInfoOffset> {
    global_ref(unit, entry.attr_value(gimli::DW_AT_type).ok()??)
}

/// A reference attribute value as an offset in `.debug_info`.
fn global_ref(unit: &Unit<'_>, value: AttributeValue<Reader<'_>>) -> Option<DebugInfoOffset> {
    match value {
        AttributeValue::UnitRef(offset) => offset.to_debug_info_offset(&unit.header),
        AttributeValue::DebugInfoRef(offset) => Some(offset),
        _ => None,
    }
}

/// An unsigned constant attribute.
fn constant(entry: &Die<'_, '_, '_>, attr: gimli::DwAt) -> Option<u64> {
    match entry.attr_value(attr).ok()?? {
        AttributeValue::Sdata(v) => u64::try_from(v).ok(),
        v => v.udata_value(),
    }
}

/// Where atomics are inside a type.
#[derive(Debug, Clone, Default)]
struct Layout {
    /// The type's size in bytes (0 when unknown).
    size: u64,
    /// The atomic byte ranges, relative to the start of the type.
    atomic: Vec<Range<u64>>,
}

impl Layout {
    /// A type with no atomic part.
    fn plain(size: u64) -> Layout {
        Layout {
            size,
            atomic: Vec::new(),
        }
    }

    /// A type that is atomic as a whole.
    fn atomic(size: u64) -> Layout {
        let whole = 0..size;
        Layout {
            size,
            atomic: if size > 0 { vec![whole] } else { Vec::new() },
        }
    }
}

/// The types of one file, resolved on demand and memoised.
struct Types<'u, 'a> {
    /// All units with their start offsets in `.debug_info`, in order.
    units: &'u [(DebugInfoOffset, Unit<'a>)],
    /// Structure types recognised as atomic by name.
    atomic_named: HashSet<DebugInfoOffset>,
    memo: HashMap<DebugInfoOffset, Option<Rc<Layout>>>,
}

impl<'u, 'a> Types<'u, 'a> {
    /// The unit containing `offset`, and the offset within it.
    fn locate(&self, offset: DebugInfoOffset) -> Option<(&'u Unit<'a>, UnitOffset)> {
        let units = self.units;
        let idx = units.partition_point(|(start, _)| start.0 <= offset.0);
        let (_, unit) = units.get(idx.checked_sub(1)?)?;
        Some((unit, offset.to_unit_offset(&unit.header)?))
    }

    /// The layout of the type at `offset`; `None` when it cannot be read.
    fn layout(&mut self, offset: DebugInfoOffset, depth: u32) -> Option<Rc<Layout>> {
        if let Some(known) = self.memo.get(&offset) {
            return known.clone();
        }
        if depth > MAX_TYPE_DEPTH {
            return None;
        }
        let layout = self.compute(offset, depth).map(Rc::new);
        self.memo.insert(offset, layout.clone());
        layout
    }

    /// Computes the layout of the type at `offset` (not memoised).
    fn compute(&mut self, offset: DebugInfoOffset, depth: u32) -> Option<Layout> {
        let (unit, unit_offset) = self.locate(offset)?;
        let entry = unit.entry(unit_offset).ok()?;
        let byte_size = constant(&entry, gimli::DW_AT_byte_size);
        let inner = type_ref(unit, &entry);
        match entry.tag() {
            gimli::DW_TAG_atomic_type => {
                let size = match byte_size {
                    Some(size) => size,
                    None => self.layout(inner?, depth + 1)?.size,
                };
                Some(Layout::atomic(size))
            }
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_immutable_type
            | gimli::DW_TAG_shared_type => match inner {
                Some(inner) => self.layout(inner, depth + 1).map(|l| (*l).clone()),
                None => Some(Layout::plain(0)),
            },
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type => {
                let size = byte_size.unwrap_or(0);
                if self.atomic_named.contains(&offset) {
                    return Some(Layout::atomic(size));
                }
                let mut atomic = Vec::new();
                for (member_offset, ty) in members(unit, unit_offset) {
                    if let Some(member) = self.layout(ty, depth + 1) {
                        atomic.extend(
                            member
                                .atomic
                                .iter()
                                .map(|r| r.start + member_offset..r.end + member_offset),
                        );
                    }
                }
                Some(Layout { size, atomic })
            }
            gimli::DW_TAG_array_type => {
                let element = self.layout(inner?, depth + 1)?;
                let count = match element_count(unit, unit_offset) {
                    Some(count) => count,
                    None if element.size > 0 => byte_size.unwrap_or(0) / element.size,
                    None => 0,
                };
                let size = byte_size.unwrap_or(count.saturating_mul(element.size));
                let atomic = if element.atomic.is_empty() || count == 0 {
                    Vec::new()
                } else if element.atomic.len() == 1 && element.atomic[0] == (0..element.size) {
                    let whole = 0..count.saturating_mul(element.size);
                    vec![whole]
                } else {
                    (0..count.min(MAX_REPLICATED_ELEMENTS))
                        .flat_map(|i| {
                            let base = i * element.size;
                            element
                                .atomic
                                .iter()
                                .map(move |r| base + r.start..base + r.end)
                        })
                        .collect()
                };
                Some(Layout { size, atomic })
            }
            _ => Some(Layout::plain(byte_size.unwrap_or(0))),
        }
    }
}

/// The data members and base classes of the aggregate at `offset`, as (offset in the
/// aggregate, type); Rust enum variants' members are included (they overlap).
fn members(unit: &Unit<'_>, offset: UnitOffset) -> Vec<(u64, DebugInfoOffset)> {
    let mut out = Vec::new();
    let Ok(mut tree) = unit.entries_tree(Some(offset)) else {
        return out;
    };
    let Ok(root) = tree.root() else {
        return out;
    };
    let mut children = root.children();
    while let Ok(Some(child)) = children.next() {
        match child.entry().tag() {
            gimli::DW_TAG_member | gimli::DW_TAG_inheritance => {
                out.extend(member(unit, child.entry()));
            }
            gimli::DW_TAG_variant_part => {
                let mut variants = child.children();
                while let Ok(Some(variant)) = variants.next() {
                    if variant.entry().tag() != gimli::DW_TAG_variant {
                        continue;
                    }
                    let mut fields = variant.children();
                    while let Ok(Some(field)) = fields.next() {
                        if field.entry().tag() == gimli::DW_TAG_member {
                            out.extend(member(unit, field.entry()));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// One data member or base class as (offset, type); `None` for static members (C++
/// declarations) and members whose location is not a constant offset.
fn member(unit: &Unit<'_>, entry: &Die<'_, '_, '_>) -> Option<(u64, DebugInfoOffset)> {
    let flag = |attr| matches!(entry.attr_value(attr), Ok(Some(AttributeValue::Flag(true))));
    if flag(gimli::DW_AT_declaration) || flag(gimli::DW_AT_external) {
        return None;
    }
    let ty = type_ref(unit, entry)?;
    let offset = match entry.attr_value(gimli::DW_AT_data_member_location).ok()? {
        // Union members have no location: they start at 0.
        None => 0,
        Some(AttributeValue::Exprloc(expr)) => {
            let mut ops = expr.operations(unit.encoding());
            match ops.next().ok()?? {
                Operation::PlusConstant { value } if ops.next().ok()?.is_none() => value,
                _ => return None,
            }
        }
        Some(AttributeValue::Sdata(v)) => u64::try_from(v).ok()?,
        Some(v) => v.udata_value()?,
    };
    Some((offset, ty))
}

/// The number of elements of the array at `offset` (the product over its dimensions);
/// `None` when a dimension's extent is unknown (flexible or variable-length arrays).
fn element_count(unit: &Unit<'_>, offset: UnitOffset) -> Option<u64> {
    let mut tree = unit.entries_tree(Some(offset)).ok()?;
    let root = tree.root().ok()?;
    let mut children = root.children();
    let mut count: u64 = 1;
    let mut dimensions = 0;
    while let Ok(Some(child)) = children.next() {
        let entry = child.entry();
        if entry.tag() != gimli::DW_TAG_subrange_type {
            continue;
        }
        dimensions += 1;
        let extent = match constant(entry, gimli::DW_AT_count) {
            Some(n) => n,
            None => {
                let upper = constant(entry, gimli::DW_AT_upper_bound)?;
                let lower = constant(entry, gimli::DW_AT_lower_bound).unwrap_or(0);
                (upper + 1).checked_sub(lower)?
            }
        };
        count = count.saturating_mul(extent);
    }
    (dimensions > 0).then_some(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// Compiles `source` (named `file`) with `compiler` and `args`; `None` when the
    /// compiler is missing or fails.
    fn build(compiler: &str, file: &str, source: &str, args: &[&str]) -> Option<PathBuf> {
        // One directory per compiler: each test removes its own when done.
        let tag = format!("atomic-vars-{compiler}");
        crate::binary::test_build::build(&tag, compiler, args, file, source)
    }

    /// True when one of the (merged) `ranges` covers `at..at + size`.
    fn covers(ranges: &[Range<u64>], at: u64, size: u64) -> bool {
        ranges.iter().any(|r| r.start <= at && at + size <= r.end)
    }

    /// The svma of the object symbol `name`.
    fn symbol(elf: &ElfFile, name: &str) -> u64 {
        *elf.object_addresses(name)
            .first()
            .unwrap_or_else(|| panic!("no symbol {name}"))
    }

    #[test]
    fn c_atomics() {
        let source = r#"
#include <stdatomic.h>
_Atomic int a; atomic_int b; int plain; struct { int x; _Atomic long y; } s;
struct pair { int q; atomic_int r; } arr[3];
const volatile _Atomic(short) cv;
int main(void) { a++; b++; plain++; s.y++; s.x++; arr[1].r++; return cv; }
"#;
        let Some(exe) = build("gcc", "a.c", source, &["-g", "-O0"]) else {
            eprintln!("gcc not available; skipping");
            return;
        };
        let elf = ElfFile::load(&exe).unwrap();
        let ranges = atomic_global_ranges(&elf);
        let a = symbol(&elf, "a");
        let b = symbol(&elf, "b");
        let plain = symbol(&elf, "plain");
        let s = symbol(&elf, "s");
        let arr = symbol(&elf, "arr");
        let cv = symbol(&elf, "cv");
        let inside = |x: u64| ranges.iter().any(|r| r.contains(&x));
        let mut expected = vec![a..a + 4, b..b + 4, s + 8..s + 16, cv..cv + 2];
        expected.extend((0..3).map(|i| arr + 8 * i + 4..arr + 8 * i + 8));
        assert_eq!(
            ranges,
            merge(expected),
            "a={a:x} b={b:x} s={s:x} arr={arr:x}"
        );
        assert!(!inside(plain));
        assert!(!inside(s));
        let _ = std::fs::remove_dir_all(exe.parent().unwrap());
    }

    #[test]
    fn cpp_atomics() {
        let source = r#"
#include <atomic>
std::atomic<int> c; std::atomic_flag f = ATOMIC_FLAG_INIT; int plain2;
std::atomic<double> d; std::atomic<long*> p;
namespace ns { struct atomic_flag { int z; }; } ns::atomic_flag fake;
struct holder { long before; std::atomic<bool> ready; } h;
int main() { c++; f.test_and_set(); plain2++; d.store(1.0); p.store(nullptr); fake.z++;
             h.ready = true; return 0; }
"#;
        let Some(exe) = build("g++", "a.cpp", source, &["-g", "-O0"]) else {
            eprintln!("g++ not available; skipping");
            return;
        };
        let elf = ElfFile::load(&exe).unwrap();
        let ranges = atomic_global_ranges(&elf);
        let inside = |x: u64| ranges.iter().any(|r| r.contains(&x));
        for (name, size) in [("c", 4), ("f", 1), ("d", 8), ("p", 8)] {
            let at = symbol(&elf, name);
            assert!(covers(&ranges, at, size), "{name} at {at:x}: {ranges:x?}");
        }
        assert!(!inside(symbol(&elf, "plain2")));
        assert!(!inside(symbol(&elf, "fake")));
        let h = symbol(&elf, "h");
        assert!(!inside(h));
        assert!(covers(&ranges, h + 8, 1), "{ranges:x?}");
        assert!(!inside(h + 9));
        let _ = std::fs::remove_dir_all(exe.parent().unwrap());
    }

    #[test]
    fn rust_atomics() {
        // `no_mangle` gives the statics plain symbol names to find them by.
        let source = r#"
use std::sync::atomic::{AtomicUsize, AtomicBool, Ordering};
use std::sync::Mutex;
#[no_mangle] static A: AtomicUsize = AtomicUsize::new(0);
#[no_mangle] static B: AtomicBool = AtomicBool::new(false);
#[no_mangle] static M: Mutex<u64> = Mutex::new(0);
#[no_mangle] static mut PLAIN: usize = 0;
fn main() {
    A.fetch_add(1, Ordering::SeqCst);
    B.store(!B.load(Ordering::Relaxed), Ordering::Release);
    *M.lock().unwrap() += 1;
    unsafe { PLAIN += 1; }
    println!("{} {}", A.load(Ordering::SeqCst), unsafe { PLAIN });
}
"#;
        let Some(exe) = build("rustc", "a.rs", source, &["-g", "-C", "opt-level=1"]) else {
            eprintln!("rustc not available; skipping");
            return;
        };
        let elf = ElfFile::load(&exe).unwrap();
        let ranges = atomic_global_ranges(&elf);
        let a = symbol(&elf, "A");
        let b = symbol(&elf, "B");
        let plain = symbol(&elf, "PLAIN");
        let m = symbol(&elf, "M");
        assert!(covers(&ranges, a, 8), "{a:x} {ranges:x?}");
        assert!(covers(&ranges, b, 1), "{b:x} {ranges:x?}");
        assert!(!ranges.iter().any(|r| r.contains(&plain)));
        // The Mutex's futex word (AtomicU32) and poison flag (AtomicBool) are atomic, the
        // protected u64 is not.
        assert!(
            ranges.iter().any(|r| r.start <= m && r.end >= m + 4),
            "{m:x} {ranges:x?}"
        );
        assert!(
            !ranges.iter().any(|r| r.contains(&(m + 8))),
            "{m:x} {ranges:x?}"
        );
        let _ = std::fs::remove_dir_all(exe.parent().unwrap());
    }
}
