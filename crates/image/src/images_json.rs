//! `images.json` (and `persim images --json`): the failure points of a trace and their
//! images, the one owner of that format:
//!
//! ```text
//! {"failure_points": [{"index", "kind", "checkpoint", "images": [hash…], "incomplete",
//!                      "space"?,
//!                      "reads"?: {"fully_persisted", "known", "explored", "skipped",
//!                                 "from_previous", "nt_prefixes", "nt_images"},
//!                      "runtime_lines"?: [line…], "outside_program_lines"?: [line…],
//!                      "protected_lines"?: [line…], "unreachable_blocks"?: [offset…],
//!                      "journal_violations"?: [{"entry",
//!                      "rule", "sequence", "lines"}…]}, …],
//!  "images": {"<hash>": {"hex"?: "…"}}}
//! ```
//!
//! Written one failure point at a time, so memory does not grow with the trace.

use crate::Image;
use persim_model::{Explored, FailureKind, JournalViolation};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// One failure point and the distinct images chosen there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointRecord {
    pub index: u64,
    pub kind: FailureKind,
    pub checkpoint: Option<u64>,
    /// BLAKE3 hashes (hex), equal to `b3sum` of the image files.
    pub images: Vec<String>,
    /// More images than the cap: a seeded sample was taken.
    pub incomplete: bool,
    /// How many images the strategy chooses here, uncapped and before images equal in
    /// content are merged (saturating; absent where a sampled set cannot be counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<u128>,
    /// `reads`: the fully persisted image and which dirty lines were explored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<PointReads>,
    /// `global-prefix` and `reads`: the dirty lines of only run-time data the program
    /// declared (`hypercall volatile`), which followed the cut instead of being explored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_lines: Vec<u64>,
    /// `global-prefix` and `reads` under the `program` scope: the dirty lines outside the
    /// PM the program accessed (the kernel's), which followed the cut.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_program_lines: Vec<u64>,
    /// `global-prefix` and `reads` under the `program` scope: the dirty lines a jbd2
    /// journal whose rules held protects (its own blocks, in-place writes it will
    /// replay), which followed the cut.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected_lines: Vec<u64>,
    /// `global-prefix` and `reads` under the `program` scope: the byte offsets on the
    /// block device of pending writes an OpenZFS pool's transaction groups keep
    /// unreachable (no uberblock references them yet), which stayed lost.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreachable_blocks: Vec<u64>,
    /// jbd2 ordering rules broken since the previous failure point (then nothing more is
    /// pruned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub journal_violations: Vec<JournalViolation>,
}

/// How the `reads` strategy chose a failure point's images.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointReads {
    /// The hash of the fully persisted image whose recovery was traced.
    pub fully_persisted: String,
    /// Whether that recovery's read set is known (not when it crashed the guest or hung:
    /// then every dirty line is explored).
    pub known: bool,
    #[serde(flatten)]
    pub lines: Explored,
    /// NT stores also persisted as program-order prefixes here.
    pub nt_prefixes: bool,
    /// The images (hashes) that apply pending NT stores: a state only they give is
    /// NT-dependent.
    pub nt_images: Vec<String>,
}

/// What the index says of one distinct image.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    /// The contents as hex, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hex: Option<String>,
}

/// A whole `images.json`, as read back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagesIndex {
    pub failure_points: Vec<PointRecord>,
    pub images: BTreeMap<String, ImageRecord>,
}

/// Why an `images.json` cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadIndexError {
    #[error("cannot read {}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is malformed", path.display())]
    Malformed {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl ImagesIndex {
    pub fn read(path: &Path) -> Result<ImagesIndex, ReadIndexError> {
        let text = std::fs::read(path).map_err(|source| ReadIndexError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_slice(&text).map_err(|source| ReadIndexError::Malformed {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The trace index of `hypercall checkpoint N`.
    pub fn checkpoint_index(&self, checkpoint: u64) -> Option<u64> {
        self.failure_points
            .iter()
            .find(|p| p.kind == FailureKind::Checkpoint && p.checkpoint == Some(checkpoint))
            .map(|p| p.index)
    }
}

/// Where the failure points of an image generation go as each is done.
pub trait PointSink {
    fn point(&mut self, point: &PointRecord) -> io::Result<()>;

    /// An image of the failure point being done is in the store (as `<hash>.img` unless
    /// its file was deleted), before the point comes: a sink may recover and delete image
    /// files as they come, so the disk never holds a whole failure point's images.
    /// `image` is its contents (a clone costs nothing).
    fn stored(&mut self, _hash: &str, _image: &Image) -> io::Result<()> {
        Ok(())
    }
}

/// A sink that keeps nothing (when only the images matter).
impl PointSink for () {
    fn point(&mut self, _: &PointRecord) -> io::Result<()> {
        Ok(())
    }
}

/// Streams an [`ImagesIndex`] as JSON: failure points as they come, the images at the end.
pub struct ImagesJsonWriter<W: Write> {
    out: W,
    first: bool,
}

impl<W: Write> ImagesJsonWriter<W> {
    pub fn new(out: W) -> Self {
        ImagesJsonWriter { out, first: true }
    }

    /// Ends the object with the distinct images; returns the writer.
    pub fn finish(mut self, images: &BTreeMap<String, ImageRecord>) -> io::Result<W> {
        if self.first {
            write!(self.out, "{{\"failure_points\":[")?;
        }
        writeln!(
            self.out,
            "],\"images\":{}}}",
            serde_json::to_string(images).map_err(io::Error::other)?
        )?;
        Ok(self.out)
    }
}

impl<W: Write> ImagesJsonWriter<W> {
    /// Ends the object after a failed generation: the failure points so far, the error,
    /// and no images, so that a reader sees valid JSON that says it is incomplete.
    pub fn fail(mut self, error: &str) -> io::Result<W> {
        if self.first {
            write!(self.out, "{{\"failure_points\":[")?;
        }
        writeln!(
            self.out,
            "],\"error\":{},\"images\":{{}}}}",
            serde_json::to_string(error).map_err(io::Error::other)?
        )?;
        Ok(self.out)
    }
}

impl<W: Write> PointSink for ImagesJsonWriter<W> {
    fn point(&mut self, point: &PointRecord) -> io::Result<()> {
        let sep = if self.first {
            "{\"failure_points\":["
        } else {
            ","
        };
        self.first = false;
        write!(
            self.out,
            "{sep}{}",
            serde_json::to_string(point).map_err(io::Error::other)?
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(index: u64, kind: FailureKind, checkpoint: Option<u64>) -> PointRecord {
        PointRecord {
            index,
            kind,
            checkpoint,
            images: vec![format!("{index:064x}")],
            incomplete: index == 9,
            space: Some(if index == 9 { 1 << 100 } else { 1 }),
            reads: None,
            runtime_lines: if index == 9 { vec![0x40] } else { Vec::new() },
            outside_program_lines: Vec::new(),
            protected_lines: Vec::new(),
            unreachable_blocks: Vec::new(),
            journal_violations: Vec::new(),
        }
    }

    #[test]
    fn the_streamed_json_reads_back_as_the_index() {
        let index = ImagesIndex {
            failure_points: vec![
                point(3, FailureKind::Fence, None),
                point(5, FailureKind::Checkpoint, Some(1)),
                point(9, FailureKind::End, Some(1)),
            ],
            images: [(
                "ab".to_string(),
                ImageRecord {
                    hex: Some("00".into()),
                },
            )]
            .into_iter()
            .collect(),
        };
        let mut writer = ImagesJsonWriter::new(Vec::new());
        for p in &index.failure_points {
            writer.point(p).unwrap();
        }
        let json = writer.finish(&index.images).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(value["failure_points"][1]["kind"], "checkpoint");
        assert_eq!(
            value["failure_points"][0]["checkpoint"],
            serde_json::Value::Null
        );
        assert_eq!(value["images"]["ab"]["hex"], "00");
        let back: ImagesIndex = serde_json::from_slice(&json).unwrap();
        assert_eq!(back, index);
        assert_eq!(back.checkpoint_index(1), Some(5));
        assert_eq!(back.checkpoint_index(2), None);
    }

    #[test]
    fn a_failed_generation_still_ends_the_object_with_its_error() {
        let mut writer = ImagesJsonWriter::new(Vec::new());
        writer.point(&point(3, FailureKind::Fence, None)).unwrap();
        let json = writer.fail("entry 7: \"bad\"").unwrap();
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(value["error"], "entry 7: \"bad\"");
        assert_eq!(value["failure_points"].as_array().unwrap().len(), 1);
        let empty = ImagesJsonWriter::new(Vec::new()).fail("x").unwrap();
        assert!(serde_json::from_slice::<serde_json::Value>(&empty).is_ok());
    }

    #[test]
    fn no_failure_points_is_still_an_object() {
        let json = ImagesJsonWriter::new(Vec::new())
            .finish(&BTreeMap::new())
            .unwrap();
        let back: ImagesIndex = serde_json::from_slice(&json).unwrap();
        assert!(back.failure_points.is_empty() && back.images.is_empty());
    }
}
