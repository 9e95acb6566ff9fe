//! PLY (ascii, binary little and big endian) through `ply-rs-bw`, one element at a time so that
//! nothing but the mesh itself is kept in memory.

use std::io::BufRead;

use ply_rs_bw::parser::{Parser, Reader};
use ply_rs_bw::ply::{ElementDef, Encoding, Property, PropertyAccess, PropertyAccessResult};

use crate::{Ctx, MeshIoError, TriangleMesh};

/// A vertex: `x`, `y`, `z` of any numeric type; other properties ignored.
#[derive(Debug, Default)]
struct Vertex([Option<f32>; 3]);

impl PropertyAccess for Vertex {
    fn new() -> Self {
        Vertex::default()
    }

    fn set_property(&mut self, name: &str, property: Property) -> PropertyAccessResult {
        let k = match name {
            "x" => 0,
            "y" => 1,
            "z" => 2,
            _ => return PropertyAccessResult::Ignored,
        };
        match property.to_f32_lossy() {
            Some(v) => {
                self.0[k] = Some(v);
                PropertyAccessResult::Set
            }
            None => PropertyAccessResult::UnsupportedType,
        }
    }
}

/// A face: its `vertex_indices` (or `vertex_index`) list of any integer type, as i64.
#[derive(Debug, Default)]
struct Face(Option<Vec<i64>>);

fn is_index_list(name: &str) -> bool {
    name == "vertex_indices" || name == "vertex_index"
}

impl PropertyAccess for Face {
    fn new() -> Self {
        Face::default()
    }

    fn set_property(&mut self, name: &str, property: Property) -> PropertyAccessResult {
        if !is_index_list(name) {
            return PropertyAccessResult::Ignored;
        }
        let list: Vec<i64> = match property {
            Property::ListChar(v) => v.into_iter().map(i64::from).collect(),
            Property::ListUChar(v) => v.into_iter().map(i64::from).collect(),
            Property::ListShort(v) => v.into_iter().map(i64::from).collect(),
            Property::ListUShort(v) => v.into_iter().map(i64::from).collect(),
            Property::ListInt(v) => v.into_iter().map(i64::from).collect(),
            Property::ListUInt(v) => v.into_iter().map(i64::from).collect(),
            _ => return PropertyAccessResult::UnsupportedType,
        };
        self.0 = Some(list);
        PropertyAccessResult::Set
    }
}

/// Any other element: read past, nothing kept.
#[derive(Debug)]
struct Skip;

impl PropertyAccess for Skip {
    fn new() -> Self {
        Skip
    }
}

pub(crate) fn parse(ctx: &Ctx<'_>, bytes: &[u8]) -> Result<TriangleMesh, MeshIoError> {
    let ply_error = |line: Option<usize>, message: String| MeshIoError::Ply {
        path: ctx.path.to_owned(),
        line,
        message,
    };
    let from_parser = |e: ply_rs_bw::parser::ParseError| ply_error(e.line(), e.to_string());

    let mut reader = Reader::new(bytes);
    let header = Parser::<Skip>::new()
        .read_header(&mut reader)
        .map_err(from_parser)?;
    let vertex_def = header
        .elements
        .get("vertex")
        .ok_or_else(|| ply_error(None, "no 'vertex' element".into()))?;
    let face_def = header
        .elements
        .get("face")
        .ok_or_else(|| ply_error(None, "no 'face' element".into()))?;
    for axis in ["x", "y", "z"] {
        if !vertex_def.properties.contains_key(axis) {
            return Err(ply_error(
                None,
                format!("element 'vertex' has no property '{axis}'"),
            ));
        }
    }
    if !face_def.properties.keys().any(|k| is_index_list(k)) {
        return Err(ply_error(
            None,
            "element 'face' has no list property 'vertex_indices' (or 'vertex_index')".into(),
        ));
    }
    let vertex_count = ctx.check_vertices(vertex_def.count as u64)?;
    ctx.check_indices(3 * face_def.count as u64)?;
    // Every element with a property takes at least a byte (binary) or a line (ascii), so a
    // count the file cannot hold is an error before anything is read; an element without
    // properties would be read `count` times from nothing.
    for def in header.elements.values() {
        if def.count > 0 && (def.properties.is_empty() || def.count > bytes.len()) {
            return Err(ply_error(
                None,
                format!(
                    "element '{}' declares {} entries{} in a {}-byte file",
                    def.name,
                    def.count,
                    if def.properties.is_empty() {
                        " without properties"
                    } else {
                        ""
                    },
                    bytes.len()
                ),
            ));
        }
    }

    let mut positions = Vec::with_capacity(vertex_def.count.min(bytes.len() / 3));
    let mut indices = Vec::with_capacity((3 * face_def.count).min(bytes.len()));
    let mut faces_seen = 0usize;
    let encoding = header.encoding;
    let mut inner = reader.into_inner();
    // The header's lines (counted from what it consumed), so `line` is that of the last line
    // read; each ascii element adds one.
    let mut line = bytes[..bytes.len() - inner.len()]
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    for def in header.elements.values() {
        for i in 0..def.count {
            if def.name == "vertex" {
                let v: Vertex = read_element(ctx, &mut inner, encoding, def, &mut line)?;
                let [Some(x), Some(y), Some(z)] = v.0 else {
                    return Err(ply_error(Some(line), format!("vertex {i} lacks x, y or z")));
                };
                positions.push([x, y, z]);
            } else if def.name == "face" {
                let f: Face = read_element(ctx, &mut inner, encoding, def, &mut line)?;
                let list = f.0.unwrap_or_default();
                let mut face = Vec::with_capacity(list.len());
                for index in list {
                    if index < 0 || index >= i64::from(vertex_count) {
                        return Err(MeshIoError::IndexOutOfRange {
                            path: ctx.path.to_owned(),
                            index,
                            vertex_count: u64::from(vertex_count),
                            location: match encoding {
                                Encoding::Ascii => format!("line {line} (face {faces_seen})"),
                                _ => format!("face {faces_seen}"),
                            },
                        });
                    }
                    face.push(index as u32);
                }
                let at = (encoding == Encoding::Ascii).then_some(line);
                ctx.push_face(&mut indices, &face, faces_seen, at)?;
                faces_seen += 1;
            } else {
                let _: Skip = read_element(ctx, &mut inner, encoding, def, &mut line)?;
            }
        }
    }
    Ok(TriangleMesh {
        indices,
        vertex_count,
        positions: Some(positions),
    })
}

/// Reads one element; `line` is the 1-based line of the element for ascii files.
fn read_element<E: PropertyAccess>(
    ctx: &Ctx<'_>,
    input: &mut &[u8],
    encoding: Encoding,
    def: &ElementDef,
    line: &mut usize,
) -> Result<E, MeshIoError> {
    let parser = Parser::<E>::new();
    let error = |line: Option<usize>, e: ply_rs_bw::parser::ParseError| MeshIoError::Ply {
        path: ctx.path.to_owned(),
        line,
        // ply-rs's messages may span lines: errors are one line.
        message: format!("element '{}': {e}", def.name)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    };
    match encoding {
        Encoding::Ascii => {
            let mut text = String::new();
            *line += 1;
            let n = input.read_line(&mut text).map_err(|e| MeshIoError::Ply {
                path: ctx.path.to_owned(),
                line: Some(*line),
                message: format!("not text: {e}"),
            })?;
            if n == 0 {
                return Err(MeshIoError::Ply {
                    path: ctx.path.to_owned(),
                    line: Some(*line),
                    message: format!("file ends inside element '{}'", def.name),
                });
            }
            parser
                .read_ascii_element(&text, def)
                .map_err(|e| error(Some(*line), e))
        }
        Encoding::BinaryLittleEndian => parser
            .read_little_endian_element(input, def)
            .map_err(|e| error(None, e)),
        Encoding::BinaryBigEndian => parser
            .read_big_endian_element(input, def)
            .map_err(|e| error(None, e)),
    }
}
