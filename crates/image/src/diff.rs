//! Finding the blocks in which an image differs from a base image of the same layout.
//!
//! Subtrees shared by pointer are skipped without looking at them, so the cost is
//! proportional to what was written since the two images diverged, not to their size.

use std::io;
use std::ptr;

use crate::tree::{Node, Span, ZEROS};

/// Granularity of reported differences: a file-system block.
pub(crate) const BLOCK_LEN: usize = 4096;

/// Calls `emit(offset, bytes)` for every `BLOCK_LEN`-aligned block of `image` whose bytes
/// differ from `base` (`None`: all zero). Both trees must have the same length and leaf size.
pub(crate) fn changed_blocks(
    image: Option<&Node>,
    base: Option<&Node>,
    span: Span,
    leaf_len: u64,
    emit: &mut dyn FnMut(u64, &[u8]) -> io::Result<()>,
) -> io::Result<()> {
    if let (Some(a), Some(b)) = (image, base) {
        if ptr::eq(a, b) {
            return Ok(());
        }
    }
    let image = image.filter(|node| !matches!(node, Node::Zero { .. }));
    let base = base.filter(|node| !matches!(node, Node::Zero { .. }));
    if image.is_none() && base.is_none() {
        return Ok(());
    }
    if span.is_leaf(leaf_len) {
        let new = image.map_or(&[][..], leaf_bytes);
        let old = base.map_or(&[][..], leaf_bytes);
        for start in (0..span.len as usize).step_by(BLOCK_LEN) {
            let end = (start + BLOCK_LEN).min(span.len as usize);
            let new_block = new.get(start..end).unwrap_or(&ZEROS[..end - start]);
            let old_block = old.get(start..end).unwrap_or(&ZEROS[..end - start]);
            if new_block != old_block {
                emit(span.offset + start as u64, new_block)?;
            }
        }
        return Ok(());
    }
    let (image_left, image_right) = parent_children(image);
    let (base_left, base_right) = parent_children(base);
    let (left_span, right_span) = span.halves();
    changed_blocks(image_left, base_left, left_span, leaf_len, emit)?;
    changed_blocks(image_right, base_right, right_span, leaf_len, emit)
}

fn leaf_bytes(node: &Node) -> &[u8] {
    match node {
        Node::Leaf { data, .. } => data,
        _ => unreachable!("a non-zero node at a leaf span is a leaf"),
    }
}

fn parent_children(node: Option<&Node>) -> (Option<&Node>, Option<&Node>) {
    match node {
        Some(Node::Parent { left, right, .. }) => (Some(left), Some(right)),
        _ => (None, None),
    }
}
