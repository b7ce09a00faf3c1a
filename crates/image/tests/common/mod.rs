//! What the image tests share; each test file uses part of it.
#![allow(dead_code)]

use persim_image::{PointRecord, PointSink};
use std::io;
use std::path::Path;

/// Every failure point's record, in order.
#[derive(Default)]
pub struct Points(pub Vec<PointRecord>);

impl PointSink for Points {
    fn point(&mut self, point: &PointRecord) -> io::Result<()> {
        self.0.push(point.clone());
        Ok(())
    }
}

/// The path of a file-system tool (`mkfs.xfs`, `debugfs`) from `package`, which
/// scripts/setup.sh installs: a test that needs it fails, saying so, where it is missing.
pub fn tool(name: &str, package: &str) -> String {
    ["/sbin", "/usr/sbin", "/usr/bin"]
        .iter()
        .map(|dir| format!("{dir}/{name}"))
        .find(|path| Path::new(path).exists())
        .unwrap_or_else(|| panic!("{name} is not installed: run scripts/setup.sh ({package})"))
}
