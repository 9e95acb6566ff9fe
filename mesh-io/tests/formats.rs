//! Every format on small files written here, gzipped variants, every error, bounds, and writes.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use mesh_io::{
    DEFAULT_MAX_BYTES, DEFAULT_MAX_INDICES, DEFAULT_MAX_VERTICES, Format, LoadOptions, MeshIoError,
    TriangleMesh, load, load_with, save,
};
use tempfile::TempDir;

/// Two triangles over four vertices (a unit square), the mesh most tests expect.
fn square() -> TriangleMesh {
    TriangleMesh {
        indices: vec![0, 1, 2, 0, 2, 3],
        vertex_count: 4,
        positions: Some(vec![
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [1.0, 1.0, 0.0],
            [0.0, 1.0, 0.0],
        ]),
    }
}

fn write(dir: &TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    fs::write(&path, bytes).unwrap();
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn triangulating() -> LoadOptions {
    LoadOptions {
        triangulate: true,
        ..LoadOptions::default()
    }
}

const OBJ: &str = "# a square\nmtllib none.mtl\no square\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\n\
                   vn 0 0 1\ng first\nusemtl red\nf 1//1 2//1 3//1\ng second\nf 1 3 4\n";

const OFF: &str = "# a square\nOFF\n4 2 0\n0 0 0\n1 0 0\n\n1 1 0 # corner\n0 1 0\n\
                   3 0 1 2\n3 0 2 3 0.5 0.5 0.5\n";

const PLY_ASCII: &str = "ply\nformat ascii 1.0\ncomment a square\nelement vertex 4\n\
    property float x\nproperty float y\nproperty float z\nproperty uchar red\n\
    element face 2\nproperty list uchar int vertex_indices\nproperty int flags\n\
    element edge 1\nproperty int vertex1\nproperty int vertex2\nend_header\n\
    0 0 0 255\n1 0 0 255\n1 1 0 255\n0 1 0 255\n3 0 1 2 7\n3 0 2 3 7\n0 1\n";

const JS: &str = "exports.positions=[[0,0,0],[1,0,0],[1,1,0],[0,1,0]]\n\
                  exports.cells=[[0,1,2],[0,2,3]];\n";

/// A binary PLY of `square()` (with an extra property and element) in either byte order.
fn ply_binary(little: bool) -> Vec<u8> {
    let order = if little {
        "binary_little_endian"
    } else {
        "binary_big_endian"
    };
    let mut out = format!(
        "ply\nformat {order} 1.0\nelement vertex 4\nproperty float x\nproperty float y\n\
         property float z\nproperty uchar red\nelement face 2\n\
         property list uchar uint vertex_indices\nelement extra 1\nproperty short s\nend_header\n"
    )
    .into_bytes();
    let f32b = |v: f32| {
        if little {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    };
    let u32b = |v: u32| {
        if little {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    };
    for p in square().positions.unwrap() {
        for c in p {
            out.extend_from_slice(&f32b(c));
        }
        out.push(200);
    }
    for t in square().indices.chunks(3) {
        out.push(3);
        for &i in t {
            out.extend_from_slice(&u32b(i));
        }
    }
    out.extend_from_slice(&[0, 1]);
    out
}

/// Every format's `square()` as (file name, bytes).
fn square_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("square.obj", OBJ.as_bytes().to_vec()),
        ("square.off", OFF.as_bytes().to_vec()),
        ("square.ply", PLY_ASCII.as_bytes().to_vec()),
        ("square-le.ply", ply_binary(true)),
        ("square-be.ply", ply_binary(false)),
        ("square.js", JS.as_bytes().to_vec()),
    ]
}

#[test]
fn every_format_reads_the_square_plain_and_gzipped() {
    let dir = TempDir::new().unwrap();
    for (name, bytes) in square_files() {
        let plain = write(&dir, name, &bytes);
        assert_eq!(load(&plain).unwrap(), square(), "{name}");
        let gz = write(&dir, &format!("{name}.gz"), &gzip(&bytes));
        assert_eq!(load(&gz).unwrap(), square(), "{name}.gz");
        // gzip is found by its magic, whatever the name says
        let hidden = write(&dir, &format!("gz-{name}"), &gzip(&bytes));
        assert_eq!(load(&hidden).unwrap(), square(), "gzip named {name}");
    }
}

#[test]
fn multi_member_gzip_is_read_whole() {
    let dir = TempDir::new().unwrap();
    let (a, b) = JS.split_at(JS.find("exports.cells").unwrap());
    let mut two = gzip(a.as_bytes());
    two.extend(gzip(b.as_bytes()));
    assert_eq!(load(write(&dir, "two.js.gz", &two)).unwrap(), square());
}

#[test]
fn raw_index_files() {
    let dir = TempDir::new().unwrap();
    let expect = |vertex_count| TriangleMesh {
        indices: vec![0, 1, 2, 0, 2, 3],
        vertex_count,
        positions: None,
    };
    let text = write(
        &dir,
        "a.idx",
        b"# two triangles\n0 1 2\n0 2\n   3 # wrapped\n",
    );
    assert_eq!(load(&text).unwrap(), expect(4));
    let declared = write(&dir, "b.idx", b"vertices 10\n0 1 2 0 2 3\n");
    assert_eq!(load(&declared).unwrap(), expect(10));
    let options = LoadOptions {
        vertex_count: Some(7),
        ..LoadOptions::default()
    };
    assert_eq!(load_with(&declared, &options).unwrap(), expect(7));

    let u16s: Vec<u8> = [0u16, 1, 2, 0, 2, 3]
        .iter()
        .flat_map(|i| i.to_le_bytes())
        .collect();
    let u32s: Vec<u8> = [0u32, 1, 2, 0, 2, 3]
        .iter()
        .flat_map(|i| i.to_le_bytes())
        .collect();
    assert_eq!(load(write(&dir, "c.u16", &u16s)).unwrap(), expect(4));
    assert_eq!(load(write(&dir, "c.u32", &u32s)).unwrap(), expect(4));
    assert_eq!(
        load(write(&dir, "c.u32.gz", &gzip(&u32s))).unwrap(),
        expect(4)
    );
    assert_eq!(
        load_with(write(&dir, "d.u32", &u32s), &options).unwrap(),
        expect(7)
    );
    // u16 values above 255 are read little-endian
    let big: Vec<u8> = [0u16, 300, 2]
        .iter()
        .flat_map(|i| i.to_le_bytes())
        .collect();
    assert_eq!(load(write(&dir, "e.u16", &big)).unwrap().vertex_count, 301);
}

#[test]
fn content_wins_over_a_lying_extension() {
    let dir = TempDir::new().unwrap();
    for (name, bytes) in [
        ("ply.obj", PLY_ASCII.as_bytes()),
        ("off.ply", OFF.as_bytes()),
        ("js.off", JS.as_bytes()),
        ("obj.mesh", OBJ.as_bytes()),
        ("noext", OBJ.as_bytes()),
    ] {
        assert_eq!(load(write(&dir, name, bytes)).unwrap(), square(), "{name}");
    }
    // an explicit format wins over everything
    let options = LoadOptions {
        format: Some(Format::IndicesText),
        ..LoadOptions::default()
    };
    let p = write(&dir, "indices.obj", b"0 1 2\n");
    assert_eq!(load_with(&p, &options).unwrap().indices, [0, 1, 2]);
    assert!(matches!(
        load(write(&dir, "what.xyz", b"hello world\n")),
        Err(MeshIoError::UnknownFormat { .. })
    ));
}

#[test]
fn polygons_are_errors_unless_triangulated() {
    let dir = TempDir::new().unwrap();
    let quad_ply = PLY_ASCII
        .replace("element face 2", "element face 1")
        .replace("3 0 1 2 7\n3 0 2 3 7\n", "4 0 1 2 3 7\n");
    let cases = [
        (
            "q.obj",
            "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1 2 3 4\n".to_string(),
            None,
        ),
        (
            "q.off",
            "OFF 4 1 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n4 0 1 2 3\n".into(),
            Some(6),
        ),
        ("q.ply", quad_ply, Some(20)),
        (
            "q.js",
            "exports.positions=[[0,0,0],[1,0,0],[1,1,0],[0,1,0]]\nexports.cells=[[0,1,2,3]]".into(),
            Some(2),
        ),
    ];
    for (name, text, line) in cases {
        let p = write(&dir, name, text.as_bytes());
        match load(&p) {
            Err(MeshIoError::NonTriangleFace {
                face: 0,
                vertices: 4,
                line: l,
                ..
            }) => assert_eq!(l, line, "{name}"),
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(load_with(&p, &triangulating()).unwrap(), square(), "{name}");
    }
    // fewer than three vertices is never a triangle, triangulating or not
    for (name, text) in [
        ("l.obj", "v 0 0 0\nv 1 0 0\nv 1 1 0\nf 1 2 3\nl 1 2\n"),
        ("l.off", "OFF\n3 2 0\n0 0 0\n1 0 0\n1 1 0\n3 0 1 2\n2 0 1\n"),
    ] {
        let p = write(&dir, name, text.as_bytes());
        for options in [LoadOptions::default(), triangulating()] {
            assert!(
                matches!(
                    load_with(&p, &options),
                    Err(MeshIoError::NonTriangleFace { vertices: 2, .. })
                ),
                "{name}: {:?}",
                load_with(&p, &options)
            );
        }
    }
}

#[test]
fn indices_past_the_vertex_count_are_errors() {
    let dir = TempDir::new().unwrap();
    let bad_ply = PLY_ASCII.replace("3 0 2 3 7", "3 0 2 4 7");
    for (name, text, index, location) in [
        (
            "o.off",
            OFF.replace("3 0 2 3 0.5", "3 0 2 9 0.5"),
            9,
            "line 10 (face 1)",
        ),
        ("o.ply", bad_ply, 4, "line 21 (face 1)"),
        (
            "n.ply",
            PLY_ASCII.replace("3 0 2 3 7", "3 0 -2 3 7"),
            -2,
            "line 21 (face 1)",
        ),
        (
            "o.js",
            JS.replace("[0,2,3]", "[0,2,4]"),
            4,
            "line 2 (cell 1)",
        ),
        ("o.idx", "vertices 3\n0 1 2\n0 2 3\n".into(), 3, "index #5"),
    ] {
        match load(write(&dir, name, text.as_bytes())) {
            Err(MeshIoError::IndexOutOfRange {
                index: i,
                location: l,
                ..
            }) => {
                assert_eq!((i, l.as_str()), (index, location), "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // binary PLY: no lines, the face number
    let mut ply = ply_binary(true);
    let last_index = ply.len() - 2 - 4;
    ply[last_index] = 4;
    match load(write(&dir, "o-le.ply", &ply)) {
        Err(MeshIoError::IndexOutOfRange {
            index: 4, location, ..
        }) => {
            assert_eq!(location, "face 1")
        }
        other => panic!("{other:?}"),
    }
    // tobj reports it without the index
    let obj = write(&dir, "o.obj", b"v 0 0 0\nv 1 0 0\nv 1 1 0\nf 1 2 4\n");
    assert!(matches!(
        load(&obj),
        Err(MeshIoError::Obj {
            source: tobj::LoadError::FaceVertexOutOfBounds,
            ..
        })
    ));
    let raw_options = LoadOptions {
        vertex_count: Some(3),
        ..LoadOptions::default()
    };
    let u32s: Vec<u8> = [0u32, 1, 3].iter().flat_map(|i| i.to_le_bytes()).collect();
    assert!(matches!(
        load_with(write(&dir, "o.u32", &u32s), &raw_options),
        Err(MeshIoError::IndexOutOfRange { index: 3, .. })
    ));
}

#[test]
fn empty_meshes_and_missing_files() {
    let dir = TempDir::new().unwrap();
    for (name, text) in [
        ("e.obj", "v 0 0 0\nv 1 0 0\nv 1 1 0\n"),
        ("e.off", "OFF\n3 0 0\n0 0 0\n1 0 0\n1 1 0\n"),
        ("e.js", "exports.positions=[[0,0,0]]\nexports.cells=[]\n"),
        ("e.idx", "# nothing\n"),
        ("e.u32", ""),
        (
            "e.ply",
            "ply\nformat ascii 1.0\nelement vertex 1\nproperty float x\nproperty float y\n\
             property float z\nelement face 0\nproperty list uchar int vertex_indices\n\
             end_header\n0 0 0\n",
        ),
    ] {
        let r = load(write(&dir, name, text.as_bytes()));
        assert!(matches!(r, Err(MeshIoError::Empty { .. })), "{name}: {r:?}");
    }
    let missing = dir.path().join("nope.obj");
    match load(&missing) {
        Err(e @ MeshIoError::NotFound { .. }) => {
            assert!(e.to_string().contains("nope.obj"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(load(dir.path()), Err(MeshIoError::Io { .. })));
    assert!(matches!(
        load(write(&dir, "t.idx", b"0 1 2 3\n")),
        Err(MeshIoError::NotWholeTriangles { indices: 4, .. })
    ));
    assert!(matches!(
        load(write(&dir, "t.u16", &[0, 0, 1])),
        Err(MeshIoError::Malformed { .. })
    ));
    // a damaged gzip stream is an I/O error naming the file
    let gz = gzip(JS.as_bytes());
    match load(write(&dir, "cut.js.gz", &gz[..gz.len() / 2])) {
        Err(e @ MeshIoError::Io { .. }) => assert!(e.to_string().contains("cut.js.gz"), "{e}"),
        other => panic!("{other:?}"),
    }
}

/// (file, text, expected line, a word the message must contain)
#[test]
fn malformed_numbers_name_their_line() {
    let dir = TempDir::new().unwrap();
    for (name, text, line, word) in [
        ("m.off", OFF.replace("1 1 0 # corner", "1 1.x 0"), 7, "1.x"),
        ("n.off", OFF.replace("1 0 0\n\n", "1 0 inf\n\n"), 5, "inf"),
        ("c.off", OFF.replace("4 2 0", "4 two 0"), 3, "two"),
        (
            "d.off",
            OFF.replace("0.5 0.5 0.5", "0.5 0.5 0.5 1 1"),
            10,
            "after the indices",
        ),
        (
            "e.off",
            OFF.replace("0.5 0.5 0.5", "0.5 red 0.5"),
            10,
            "red",
        ),
        ("m.idx", "0 1 2\n0 2 -3\n".into(), 2, "-3"),
        ("m.js", JS.replace("[0,2,3]", "[0,2,x]"), 2, "number"),
        ("p.js", JS.replace("[1,1,0]", "[1,1,0,5]"), 1, "three"),
        (
            "q.js",
            JS.replace("exports.cells", "exports.faces"),
            2,
            "exports.faces",
        ),
        ("r.js", format!("{JS}exports.cells=[]\n"), 3, "twice"),
        (
            "s.js",
            JS.replace("exports.cells=[[0,1,2],", "exports.cells=[[0,1,2]"),
            2,
            "','",
        ),
    ] {
        match load(write(&dir, name, text.as_bytes())) {
            Err(e @ MeshIoError::Malformed { line: l, .. }) => {
                assert_eq!(l, line, "{name}: {e}");
                assert!(e.to_string().contains(word), "{name}: {e}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // PLY errors carry the parser's line
    let bad = PLY_ASCII.replace("1 1 0 255", "1 one 0 255");
    match load(write(&dir, "m.ply", bad.as_bytes())) {
        Err(MeshIoError::Ply { line: Some(18), .. }) => {}
        other => panic!("{other:?}"),
    }
    let obj = write(&dir, "m.obj", b"v 0 0 zero\nv 1 0 0\nv 1 1 0\nf 1 2 3\n");
    assert!(matches!(load(&obj), Err(MeshIoError::Obj { .. })));
}

#[test]
fn ply_headers_cannot_make_the_reader_allocate() {
    let dir = TempDir::new().unwrap();
    // counts far past the limits are refused before reading
    let huge = PLY_ASCII.replace("element vertex 4", "element vertex 1000000000000");
    assert!(matches!(
        load(write(&dir, "v.ply", huge.as_bytes())),
        Err(MeshIoError::TooManyVertices { .. })
    ));
    let huge = PLY_ASCII.replace("element face 2", "element face 1000000000");
    assert!(matches!(
        load(write(&dir, "f.ply", huge.as_bytes())),
        Err(MeshIoError::TooManyIndices { .. })
    ));
    // within the limits, but more entries than the file has bytes
    let huge = PLY_ASCII.replace("element edge 1", "element edge 5000000");
    assert!(matches!(
        load(write(&dir, "e.ply", huge.as_bytes())),
        Err(MeshIoError::Ply { .. })
    ));
    // an element without properties would be read from nothing
    let mut empty = ply_binary(true);
    let at = empty.windows(10).position(|w| w == b"end_header").unwrap();
    empty.splice(at..at, b"element nothing 1000000000\n".iter().copied());
    assert!(matches!(
        load(write(&dir, "n.ply", &empty)),
        Err(MeshIoError::Ply { .. })
    ));
    // and OFF counts the same way
    let off = "OFF\n4000000000 1 0\n0 0 0\n";
    assert!(matches!(
        load(write(&dir, "v.off", off.as_bytes())),
        Err(MeshIoError::TooManyVertices { .. })
    ));
    // a truncated binary file
    let short = ply_binary(false);
    let r = load(write(&dir, "t.ply", &short[..short.len() - 5]));
    assert!(matches!(r, Err(MeshIoError::Ply { .. })), "{r:?}");
}

#[test]
fn limits_refuse_big_files_and_gzip_bombs() {
    assert_eq!(DEFAULT_MAX_BYTES, 1 << 30);
    assert_eq!(DEFAULT_MAX_INDICES, 1 << 27);
    assert_eq!(DEFAULT_MAX_VERTICES, 1 << 27);
    let dir = TempDir::new().unwrap();
    let limit = 1 << 20;
    let options = LoadOptions {
        max_bytes: limit,
        ..LoadOptions::default()
    };
    // 64 MiB of zeros gzip to about 64 KB: the read stops after limit + 1 bytes
    let bomb = {
        let mut e = GzEncoder::new(Vec::new(), Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            e.write_all(&zeros).unwrap();
        }
        e.finish().unwrap()
    };
    assert!(bomb.len() < 1 << 17, "{}", bomb.len());
    let p = write(&dir, "bomb.u32.gz", &bomb);
    assert!(matches!(
        load_with(&p, &options),
        Err(MeshIoError::TooLarge { limit: l, .. }) if l == limit
    ));
    // exactly at the limit is fine; one byte over is not
    let at_limit: Vec<u8> = (0..limit / 4)
        .flat_map(|i| (i as u32 % 3).to_le_bytes())
        .collect();
    let at_limit = &at_limit[..(limit as usize / 12) * 12];
    let p = write(&dir, "ok.u32", at_limit);
    let small = LoadOptions {
        max_bytes: at_limit.len() as u64,
        ..LoadOptions::default()
    };
    assert_eq!(load_with(&p, &small).unwrap().vertex_count, 3);
    let smaller = LoadOptions {
        max_bytes: at_limit.len() as u64 - 1,
        ..LoadOptions::default()
    };
    assert!(matches!(
        load_with(&p, &smaller),
        Err(MeshIoError::TooLarge { .. })
    ));
    // index and vertex counts
    let few = LoadOptions {
        max_indices: 5,
        ..LoadOptions::default()
    };
    for (name, bytes) in square_files() {
        let r = load_with(write(&dir, name, &bytes), &few);
        assert!(
            matches!(r, Err(MeshIoError::TooManyIndices { .. })),
            "{name}: {r:?}"
        );
    }
    let three = LoadOptions {
        max_vertices: 3,
        ..LoadOptions::default()
    };
    for (name, bytes) in square_files() {
        let r = load_with(write(&dir, name, &bytes), &three);
        assert!(
            matches!(r, Err(MeshIoError::TooManyVertices { .. })),
            "{name}: {r:?}"
        );
    }
}

#[test]
fn obj_vertices_are_numbered_by_first_use() {
    let dir = TempDir::new().unwrap();
    // v 1 is never used; faces use 4, 2, 3 first
    let p = write(
        &dir,
        "r.obj",
        b"v 9 9 9\nv 1 0 0\nv 1 1 0\nv 0 0 0\nf 4 2 3\nf -1 -2 -3\n",
    );
    let mesh = load(&p).unwrap();
    assert_eq!(mesh.indices, [0, 1, 2, 0, 2, 1]);
    assert_eq!(mesh.vertex_count, 3);
    assert_eq!(
        mesh.positions.unwrap(),
        [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    );
}

#[test]
fn writes_read_back_the_same_mesh() {
    let dir = TempDir::new().unwrap();
    let mut mesh = square();
    mesh.positions = Some(vec![
        [0.1, -2.5e-7, 3.0],
        [1.0e10, 0.333_333_34, -0.0],
        [1.5, 1.0, 7.0],
        [f32::MIN_POSITIVE, 1.0, 0.0],
    ]);
    let obj = dir.path().join("out.obj");
    save(&obj, &mesh).unwrap();
    assert_eq!(load(&obj).unwrap(), mesh);

    let no_positions = TriangleMesh {
        indices: vec![0, 1, 2, 2, 1, 3, 3, 3, 3],
        vertex_count: 4,
        positions: None,
    };
    for name in ["out.idx", "out.u32", "out.u16"] {
        let p = dir.path().join(name);
        save(&p, &no_positions).unwrap();
        assert_eq!(load(&p).unwrap(), no_positions, "{name}");
    }
    // the text form keeps unused trailing vertices, the binary forms cannot
    let wide = TriangleMesh {
        vertex_count: 9,
        ..no_positions.clone()
    };
    save(dir.path().join("wide.idx"), &wide).unwrap();
    assert_eq!(load(dir.path().join("wide.idx")).unwrap(), wide);
    // OBJ without positions writes zeros
    save(dir.path().join("zeros.obj"), &no_positions).unwrap();
    let back = load(dir.path().join("zeros.obj")).unwrap();
    assert_eq!(back.indices, no_positions.indices);
    assert_eq!(back.positions.unwrap(), vec![[0.0; 3]; 4]);

    let big = TriangleMesh {
        indices: vec![0, 1, 70000],
        vertex_count: 70001,
        positions: None,
    };
    assert!(matches!(
        save(dir.path().join("big.u16"), &big),
        Err(MeshIoError::Unwritable { .. })
    ));
    assert!(!dir.path().join("big.u16").exists());
    assert!(matches!(
        save(dir.path().join("x.ply"), &mesh),
        Err(MeshIoError::Unwritable { .. })
    ));
    // an invalid mesh is not written
    let bad = TriangleMesh {
        indices: vec![0, 1, 5],
        vertex_count: 3,
        positions: None,
    };
    assert!(matches!(
        save(dir.path().join("bad.idx"), &bad),
        Err(MeshIoError::IndexOutOfRange { .. })
    ));
    assert!(!dir.path().join("bad.idx").exists());
    // no temporary files are left behind
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

#[test]
fn writes_replace_files_but_never_go_through_symlinks() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new().unwrap();
    let target = write(&dir, "precious.txt", b"keep me\n");
    let link = dir.path().join("link.obj");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert!(matches!(
        save(&link, &square()),
        Err(MeshIoError::Symlink { .. })
    ));
    assert_eq!(fs::read(&target).unwrap(), b"keep me\n");
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // a dangling link too
    let dangling = dir.path().join("dangling.idx");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    assert!(matches!(
        save(&dangling, &square()),
        Err(MeshIoError::Symlink { .. })
    ));
    assert!(!dir.path().join("nowhere").exists());

    // an existing regular file is replaced, keeping its permission bits
    let existing = write(&dir, "old.obj", b"old");
    fs::set_permissions(&existing, fs::Permissions::from_mode(0o600)).unwrap();
    save(&existing, &square()).unwrap();
    assert_eq!(load(&existing).unwrap(), square());
    let mode = fs::metadata(&existing).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let fresh = dir.path().join("new.obj");
    save(&fresh, &square()).unwrap();
    assert_eq!(
        fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
        0o644
    );
    // a directory is not replaced
    fs::create_dir(dir.path().join("d.obj")).unwrap();
    assert!(matches!(
        save(dir.path().join("d.obj"), &square()),
        Err(MeshIoError::Unwritable { .. })
    ));
}

#[test]
fn errors_name_the_file() {
    let dir = TempDir::new().unwrap();
    let p: &Path = &write(&dir, "named.off", b"OFF\n3 1 0\n0 0 0\n");
    let e = load(p).unwrap_err();
    assert!(e.to_string().contains("named.off"), "{e}");
}

#[test]
fn a_fifo_or_a_directory_is_refused_without_blocking() {
    let dir = TempDir::new().unwrap();
    let fifo = dir.path().join("mesh.obj");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // No writer ever comes: a blocking open would hang here forever.
    for path in [fifo.as_path(), dir.path()] {
        let err = mesh_io::load(path).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
    }
}
