//! The binary form is what makes long traces affordable: check it stays much smaller than
//! the text form on a file-system-like trace.

use persim_trace::synthetic::FsLike;
use persim_trace::{BinaryWriter, Header, TextWriter};

const ENTRIES: usize = 200_000;

fn sizes(with_pc: bool) -> (usize, usize) {
    let header = Header {
        pm_size: 0x100_0000,
        ..Header::default()
    };
    let mut text = TextWriter::new(Vec::new(), &header).unwrap();
    let mut binary = BinaryWriter::new(Vec::new(), &header).unwrap();
    for entry in FsLike::new(42, with_pc).take(ENTRIES) {
        text.write(&entry).unwrap();
        binary.write(&entry).unwrap();
    }
    (text.finish().unwrap().len(), binary.finish().unwrap().len())
}

#[test]
fn binary_is_much_smaller_than_text() {
    for with_pc in [false, true] {
        let (text, binary) = sizes(with_pc);
        let ratio = binary as f64 / text as f64;
        println!(
            "with_pc={with_pc}: text {text} B, binary {binary} B ({:.2} B/entry), ratio {ratio:.3}",
            binary as f64 / ENTRIES as f64
        );
        assert!(ratio < 0.3, "binary/text = {ratio:.3} with_pc={with_pc}");
    }
}
