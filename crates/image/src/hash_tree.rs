//! Memoised BLAKE3 over the image tree.
//!
//! Every node caches the chaining value of its subtree. A write clears the caches on its path
//! only (see `tree::write`), so re-hashing after a small change recomputes the written leaves
//! and the O(log n) parents above them. The cached value of a node depends on its position as
//! well as its bytes (BLAKE3 mixes the chunk counter in), which is fine because a node has one
//! position: clones share whole subtrees at the same offsets.

use std::sync::Arc;

use blake3::hazmat::{
    merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode,
};
use blake3::Hasher;

use crate::tree::{Node, Span, ZEROS};

/// The BLAKE3 hash of the whole tree, equal to `blake3::hash` of its bytes.
pub(crate) fn root_hash(root: &Node, len: u64, leaf_len: u64) -> blake3::Hash {
    let span = Span { offset: 0, len };
    if span.is_leaf(leaf_len) {
        return leaf_hasher(root, span).finalize();
    }
    let (left, right) = children(root, span);
    let (left_span, right_span) = span.halves();
    merge_subtrees_root(
        &chaining_value(left, left_span, leaf_len),
        &chaining_value(right, right_span, leaf_len),
        Mode::Hash,
    )
}

fn chaining_value(node: &Node, span: Span, leaf_len: u64) -> ChainingValue {
    *node.cv().get_or_init(|| {
        if span.is_leaf(leaf_len) {
            return leaf_hasher(node, span).finalize_non_root();
        }
        let (left, right) = children(node, span);
        let (left_span, right_span) = span.halves();
        merge_subtrees_non_root(
            &chaining_value(left, left_span, leaf_len),
            &chaining_value(right, right_span, leaf_len),
            Mode::Hash,
        )
    })
}

/// The two children of a node whose span is longer than a leaf; a zero node gets hers now.
fn children(node: &Node, span: Span) -> (&Node, &Node) {
    match node {
        Node::Parent { left, right, .. } => (left, right),
        Node::Zero { children, .. } => {
            let (left, right) =
                children.get_or_init(|| (Arc::new(Node::zero()), Arc::new(Node::zero())));
            (left, right)
        }
        Node::Leaf { .. } => unreachable!("a leaf node at {span:?}, which is longer than a leaf"),
    }
}

/// A hasher that has consumed the bytes of a leaf span.
fn leaf_hasher(node: &Node, span: Span) -> Hasher {
    let mut hasher = Hasher::new();
    if span.offset != 0 {
        hasher.set_input_offset(span.offset);
    }
    match node {
        Node::Leaf { data, .. } => {
            hasher.update(data);
        }
        Node::Parent { .. } => unreachable!("a parent node at {span:?}, which fits a leaf"),
        Node::Zero { .. } => {
            let mut left = span.len as usize;
            while left > 0 {
                let piece = left.min(ZEROS.len());
                hasher.update(&ZEROS[..piece]);
                left -= piece;
            }
        }
    }
    hasher
}
