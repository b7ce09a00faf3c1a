//! The persistent tree that holds an image's bytes.
//!
//! Above the leaves the tree has exactly BLAKE3's shape, so every node can cache the chaining
//! value of its subtree (see `hash_tree`). Nodes are shared between clones through `Arc` and
//! copied on write along the path to the written leaves only; a node is never mutated while
//! shared, which is what makes the cached chaining values sound.

use std::sync::{Arc, OnceLock};

use blake3::hazmat::{left_subtree_len, ChainingValue};

/// Enough zeros to compare or hash zero ranges without allocating.
pub(crate) static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

#[derive(Clone)]
pub(crate) enum Node {
    /// An all-zero subtree, stored as nothing. Hashing creates its children (also zero) so
    /// that their chaining values survive a later write that splits this node.
    Zero {
        children: OnceLock<(Arc<Node>, Arc<Node>)>,
        cv: OnceLock<ChainingValue>,
    },
    /// The bytes of one leaf span (`leaf_len`, or less for the last leaf).
    Leaf {
        data: Box<[u8]>,
        cv: OnceLock<ChainingValue>,
    },
    /// A span longer than a leaf, split where BLAKE3 splits it.
    Parent {
        left: Arc<Node>,
        right: Arc<Node>,
        cv: OnceLock<ChainingValue>,
    },
}

impl Node {
    pub(crate) fn zero() -> Node {
        Node::Zero {
            children: OnceLock::new(),
            cv: OnceLock::new(),
        }
    }

    pub(crate) fn cv(&self) -> &OnceLock<ChainingValue> {
        match self {
            Node::Zero { cv, .. } | Node::Leaf { cv, .. } | Node::Parent { cv, .. } => cv,
        }
    }
}

/// The byte range a node covers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub offset: u64,
    pub len: u64,
}

impl Span {
    fn end(self) -> u64 {
        self.offset + self.len
    }

    pub(crate) fn is_leaf(self, leaf_len: u64) -> bool {
        self.len <= leaf_len
    }

    /// BLAKE3's split: the left subtree takes the largest power-of-two number of chunks that
    /// leaves at least one byte for the right. Only for spans longer than a leaf (and so
    /// longer than one chunk).
    pub(crate) fn halves(self) -> (Span, Span) {
        let left = left_subtree_len(self.len);
        (
            Span {
                offset: self.offset,
                len: left,
            },
            Span {
                offset: self.offset + left,
                len: self.len - left,
            },
        )
    }

    /// The part of a buffer of `len` bytes placed at absolute `offset` that falls into this
    /// span: its absolute offset and its range in the buffer.
    fn clip(self, offset: u64, len: usize) -> Option<(u64, std::ops::Range<usize>)> {
        let start = offset.max(self.offset);
        let end = (offset + len as u64).min(self.end());
        (start < end).then(|| (start, (start - offset) as usize..(end - offset) as usize))
    }
}

/// Writes `data` at absolute `offset` (inside `span`) into the subtree, copying shared nodes.
pub(crate) fn write(node: &mut Arc<Node>, span: Span, leaf_len: u64, offset: u64, data: &[u8]) {
    write_node(Arc::make_mut(node), span, leaf_len, offset, data);
}

fn write_node(node: &mut Node, span: Span, leaf_len: u64, offset: u64, data: &[u8]) {
    match node {
        Node::Zero { children, .. } => {
            *node = if span.is_leaf(leaf_len) {
                Node::Leaf {
                    data: vec![0; span.len as usize].into_boxed_slice(),
                    cv: OnceLock::new(),
                }
            } else {
                let (left, right) = children
                    .take()
                    .unwrap_or_else(|| (Arc::new(Node::zero()), Arc::new(Node::zero())));
                Node::Parent {
                    left,
                    right,
                    cv: OnceLock::new(),
                }
            };
            write_node(node, span, leaf_len, offset, data);
        }
        Node::Leaf { data: bytes, cv } => {
            cv.take();
            let start = (offset - span.offset) as usize;
            bytes[start..start + data.len()].copy_from_slice(data);
        }
        Node::Parent { left, right, cv } => {
            cv.take();
            let (left_span, right_span) = span.halves();
            for (child, child_span) in [(left, left_span), (right, right_span)] {
                if let Some((start, range)) = child_span.clip(offset, data.len()) {
                    write(child, child_span, leaf_len, start, &data[range]);
                }
            }
        }
    }
}

/// Reads the subtree's bytes at absolute `offset` (inside `span`) into `buf`.
pub(crate) fn read(node: &Node, span: Span, offset: u64, buf: &mut [u8]) {
    match node {
        Node::Zero { .. } => buf.fill(0),
        Node::Leaf { data, .. } => {
            let start = (offset - span.offset) as usize;
            buf.copy_from_slice(&data[start..start + buf.len()]);
        }
        Node::Parent { left, right, .. } => {
            let (left_span, right_span) = span.halves();
            for (child, child_span) in [(left, left_span), (right, right_span)] {
                if let Some((start, range)) = child_span.clip(offset, buf.len()) {
                    read(child, child_span, start, &mut buf[range]);
                }
            }
        }
    }
}
