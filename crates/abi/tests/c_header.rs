//! include/persim.h spells the hypercall encoding again for C programs: its constants must
//! be those of `persim_abi::hypercall`, so that a program's requests reach the tracer as
//! the guest tool's do.

use persim_abi::hypercall::{Operation, MAGIC};
use std::collections::BTreeMap;

fn header() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include/persim.h");
    std::fs::read_to_string(path).unwrap()
}

/// Every `#define PERSIM_… <number>u` of the header.
fn constants(header: &str) -> BTreeMap<String, u64> {
    header
        .lines()
        .filter_map(|line| {
            let mut words = line.strip_prefix("#define ")?.split_whitespace();
            let (name, value) = (words.next()?, words.next()?);
            let value = value.strip_suffix('u')?;
            let value = match value.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => value.parse(),
            };
            Some((name.to_owned(), value.unwrap()))
        })
        .collect()
}

#[test]
fn the_header_encodes_requests_as_the_abi_does() {
    let header = header();
    let constants = constants(&header);
    assert_eq!(constants["PERSIM_HYPERCALL_LEAF"], u64::from(MAGIC));
    let ops = [
        ("CHECKPOINT", Operation::Checkpoint(0)),
        ("VOLATILE", Operation::Volatile { addr: 0, len: 0 }),
    ];
    for (name, op) in ops {
        let code = u64::from(op.encode().0);
        assert_eq!(constants[&format!("PERSIM_OP_{name}")], code, "{name}");
        // Each request passes its own operation to the one cpuid.
        let function = format!("persim_{}(", name.to_lowercase());
        let body = &header[header.find(&format!("void {function}")).unwrap()..];
        let body = &body[..body.find("\n}").unwrap()];
        assert!(
            body.contains(&format!("persim_hypercall_(PERSIM_OP_{name},")),
            "{body}"
        );
    }
    // No operation of the header goes untested above.
    let in_header = constants.keys().filter(|k| k.starts_with("PERSIM_OP_"));
    assert_eq!(in_header.count(), ops.len(), "{constants:?}");
    // The argument travels in rcx, as `hypercall checkpoint N` sends the number.
    assert!(header.contains("\"+c\"(arg)"), "{header}");
}
