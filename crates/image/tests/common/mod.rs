//! What the image tests share.

use persim_image::{PointRecord, PointSink};
use std::io;

/// Every failure point's record, in order.
#[derive(Default)]
pub struct Points(pub Vec<PointRecord>);

impl PointSink for Points {
    fn point(&mut self, point: &PointRecord) -> io::Result<()> {
        self.0.push(point.clone());
        Ok(())
    }
}
