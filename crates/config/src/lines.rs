//! Path → position index of a YAML text, built from yaml-rust2 events.
//!
//! Paths use the same syntax as the validator and serde_path_to_error:
//! `ports[2].allowed-vlans`. The root node has the empty path.

use std::collections::{HashMap, HashSet};

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Position (1-based line and column) of every node in a YAML document:
/// of the value for scalars, of the key for collections that are mapping
/// values, of the collection itself otherwise.
#[derive(Debug, Default)]
pub struct LineIndex {
    nodes: HashMap<String, (usize, usize)>,
    duplicates: Vec<(String, (usize, usize))>,
}

enum Frame {
    /// Mapping; `key` is Some(path of the pending value) once a key is read.
    Map {
        path: String,
        /// Value path and key position once a key is read.
        key: Option<(String, (usize, usize))>,
        seen: HashSet<String>,
        /// Not a mapping value: its position becomes that of its first key
        /// (yaml-rust2 marks a block mapping at its first `:`).
        at_first_key: bool,
    },
    Seq {
        path: String,
        next: usize,
    },
    /// A complex (non-scalar) mapping key; its contents are not indexed.
    Ignored,
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    nodes: HashMap<String, (usize, usize)>,
    duplicates: Vec<(String, (usize, usize))>,
    /// Only the first document is indexed.
    documents: usize,
}

fn position(mark: Marker) -> (usize, usize) {
    (mark.line().max(1), mark.col() + 1)
}

fn join_key(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl Builder {
    /// Where the next node goes: `Some((path, key position))` for an
    /// indexed value node, `None` for a mapping key or ignored content.
    fn next_node(
        &mut self,
        scalar: Option<&str>,
        mark: Marker,
    ) -> Option<(String, Option<(usize, usize)>)> {
        match self.stack.last_mut() {
            None => Some((String::new(), None)),
            Some(Frame::Ignored) => None,
            Some(Frame::Seq { path, next }) => {
                let p = format!("{path}[{next}]");
                *next += 1;
                Some((p, None))
            }
            Some(Frame::Map {
                path,
                key,
                seen,
                at_first_key,
            }) => match key.take() {
                Some((value_path, key_pos)) => Some((value_path, Some(key_pos))),
                None => {
                    // This node is a key.
                    let k = scalar.unwrap_or("?");
                    let p = join_key(path, k);
                    if *at_first_key {
                        *at_first_key = false;
                        self.nodes.insert(path.clone(), position(mark));
                    }
                    if !seen.insert(k.to_string()) {
                        self.duplicates.push((p.clone(), position(mark)));
                    }
                    *key = Some((p, position(mark)));
                    None
                }
            },
        }
    }

    fn record(&mut self, path: &str, pos: (usize, usize)) {
        self.nodes.entry(path.to_string()).or_insert(pos);
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.documents > 1 {
            return;
        }
        match ev {
            Event::DocumentStart => self.documents += 1,
            Event::Scalar(value, ..) => {
                if let Some((p, _)) = self.next_node(Some(&value), mark) {
                    self.record(&p, position(mark));
                }
            }
            Event::Alias(_) => {
                if let Some((p, _)) = self.next_node(Some("?"), mark) {
                    self.record(&p, position(mark));
                }
            }
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                let is_map = matches!(ev, Event::MappingStart(..));
                let frame = match self.next_node(None, mark) {
                    Some((path, key_pos)) => {
                        // A collection is reported at its key (`ports:`),
                        // not at its first item on the next line.
                        self.record(&path, key_pos.unwrap_or(position(mark)));
                        if is_map {
                            Frame::Map {
                                path,
                                key: None,
                                seen: HashSet::new(),
                                at_first_key: key_pos.is_none(),
                            }
                        } else {
                            Frame::Seq { path, next: 0 }
                        }
                    }
                    None => Frame::Ignored,
                };
                self.stack.push(frame);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                self.stack.pop();
            }
            _ => {}
        }
    }
}

impl LineIndex {
    /// Indexes `text`. On a YAML syntax error the index covers what was
    /// read before it.
    pub fn build(text: &str) -> LineIndex {
        let mut b = Builder::default();
        let mut parser = Parser::new_from_str(text);
        let _ = parser.load(&mut b, false);
        LineIndex {
            nodes: b.nodes,
            duplicates: b.duplicates,
        }
    }

    /// Position of the first repeated occurrence of the mapping key whose
    /// value path is `path` (e.g. `ports[0].name`), if it is repeated.
    pub fn duplicate(&self, path: &str) -> Option<(usize, usize)> {
        self.duplicates
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, pos)| *pos)
    }

    /// Position of the node at `path`, exactly.
    pub fn get(&self, path: &str) -> Option<(usize, usize)> {
        self.nodes.get(path).copied()
    }

    /// Position of the node at `path`, or of its nearest ancestor present
    /// in the file (e.g. the port entry when its `vlan` key is absent).
    pub fn locate(&self, path: &str) -> Option<(usize, usize)> {
        let mut p = path;
        loop {
            if let Some(pos) = self.get(p) {
                return Some(pos);
            }
            if p.is_empty() {
                return None;
            }
            p = parent(p);
        }
    }
}

/// `ports[2].vlan` → `ports[2]` → `ports` → ``.
pub(crate) fn parent(path: &str) -> &str {
    let cut = if path.ends_with(']') {
        path.rfind('[')
    } else {
        path.rfind('.')
    };
    match cut {
        Some(i) => &path[..i],
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_nested_paths() {
        let text = "switch:\n  workers: 2\nports:\n  - name: a\n    vlan: 10\n  - {name: b, mode: trunk}\n";
        let idx = LineIndex::build(text);
        assert_eq!(idx.get("switch.workers"), Some((2, 12)));
        assert_eq!(idx.get("ports[0].name"), Some((4, 11)));
        assert_eq!(idx.get("ports[0].vlan"), Some((5, 11)));
        assert_eq!(idx.get("ports[1].mode").map(|p| p.0), Some(6));
        assert_eq!(idx.get("ports"), Some((3, 1)));
        assert_eq!(idx.get("ports[0]"), Some((4, 5)));
        assert_eq!(idx.locate("ports[0].mtu").map(|p| p.0), Some(4));
        assert_eq!(idx.locate("ports[1].vlan").map(|p| p.0), Some(6));
        assert_eq!(idx.locate("static-macs[0].port"), idx.get(""));
        assert_eq!(idx.duplicate("ports[0].name"), None);
        let idx = LineIndex::build("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n");
        assert_eq!(idx.duplicate("b.c"), Some((4, 3)));
        assert_eq!(idx.duplicate("a"), Some((5, 1)));
        assert_eq!(idx.get("b.c"), Some((3, 6)));
    }

    #[test]
    fn parent_paths() {
        assert_eq!(parent("ports[2].vlan"), "ports[2]");
        assert_eq!(parent("ports[2]"), "ports");
        assert_eq!(parent("ports"), "");
    }
}
