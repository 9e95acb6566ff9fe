//! Atomic writes of OBJ and raw index files (see "Writing" in the crate docs).

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::{Format, MeshIoError, TriangleMesh};

/// Writes `mesh` in the format the extension of `path` names: `.obj`, `.idx`, `.u16`, `.u32`.
pub fn save(path: impl AsRef<Path>, mesh: &TriangleMesh) -> Result<(), MeshIoError> {
    let path = path.as_ref();
    match Format::from_extension(path.extension().and_then(|e| e.to_str()).unwrap_or("")) {
        Some(Format::Obj) => write_obj(path, mesh),
        Some(Format::IndicesText) => write_indices_text(path, mesh),
        Some(Format::IndicesU16) => write_indices_u16(path, mesh),
        Some(Format::IndicesU32) => write_indices_u32(path, mesh),
        _ => Err(MeshIoError::Unwritable {
            path: path.to_owned(),
            reason: "writes .obj, .idx, .u16 or .u32 (by extension)".into(),
        }),
    }
}

/// Writes an OBJ file: one `v` line per vertex (its position, or `0 0 0` when the mesh has
/// none), then one `f` line per triangle.
pub fn write_obj(path: impl AsRef<Path>, mesh: &TriangleMesh) -> Result<(), MeshIoError> {
    let path = path.as_ref();
    mesh.validate(path)?;
    atomic_write(path, |w| {
        writeln!(
            w,
            "# {} vertices, {} triangles",
            mesh.vertex_count,
            mesh.triangle_count()
        )?;
        match &mesh.positions {
            // `{}` on f32 prints the shortest text that reads back as the same value.
            Some(p) => p
                .iter()
                .try_for_each(|[x, y, z]| writeln!(w, "v {x} {y} {z}"))?,
            None => (0..mesh.vertex_count).try_for_each(|_| writeln!(w, "v 0 0 0"))?,
        }
        for t in mesh.indices.chunks_exact(3) {
            writeln!(w, "f {} {} {}", t[0] + 1, t[1] + 1, t[2] + 1)?;
        }
        Ok(())
    })
}

/// Writes an `.idx` text file: `vertices N`, then one triangle per line.
pub fn write_indices_text(path: impl AsRef<Path>, mesh: &TriangleMesh) -> Result<(), MeshIoError> {
    let path = path.as_ref();
    mesh.validate(path)?;
    atomic_write(path, |w| {
        writeln!(w, "vertices {}", mesh.vertex_count)?;
        for t in mesh.indices.chunks_exact(3) {
            writeln!(w, "{} {} {}", t[0], t[1], t[2])?;
        }
        Ok(())
    })
}

/// Writes little-endian `u16` indices; refuses a mesh with an index above 65535. The vertex
/// count is not stored (a reader takes the largest index plus one).
pub fn write_indices_u16(path: impl AsRef<Path>, mesh: &TriangleMesh) -> Result<(), MeshIoError> {
    let path = path.as_ref();
    mesh.validate(path)?;
    if let Some(&big) = mesh.indices.iter().find(|&&i| i > u32::from(u16::MAX)) {
        return Err(MeshIoError::Unwritable {
            path: path.to_owned(),
            reason: format!("index {big} does not fit in u16"),
        });
    }
    atomic_write(path, |w| {
        mesh.indices
            .iter()
            .try_for_each(|&i| w.write_all(&(i as u16).to_le_bytes()))
    })
}

/// Writes little-endian `u32` indices. The vertex count is not stored.
pub fn write_indices_u32(path: impl AsRef<Path>, mesh: &TriangleMesh) -> Result<(), MeshIoError> {
    let path = path.as_ref();
    mesh.validate(path)?;
    atomic_write(path, |w| {
        mesh.indices
            .iter()
            .try_for_each(|&i| w.write_all(&i.to_le_bytes()))
    })
}

/// Writes through a temporary file in `path`'s directory renamed over `path`; refuses a
/// symbolic link at `path`. (rename(2) replaces the link itself, never its target, so the check
/// is about intent, not a race: nothing is ever written through a link.)
fn atomic_write(
    path: &Path,
    body: impl FnOnce(&mut BufWriter<&fs::File>) -> std::io::Result<()>,
) -> Result<(), MeshIoError> {
    let io = |what: &'static str| {
        move |source| MeshIoError::Io {
            path: path.to_owned(),
            what,
            source,
        }
    };
    let existing = match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(MeshIoError::Symlink {
                path: path.to_owned(),
            });
        }
        Ok(m) if !m.is_file() => {
            return Err(MeshIoError::Unwritable {
                path: path.to_owned(),
                reason: "exists and is not a regular file".into(),
            });
        }
        Ok(m) => Some(m.permissions()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("cannot inspect")(e)),
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| MeshIoError::Unwritable {
        path: path.to_owned(),
        reason: "not a file name".into(),
    })?;
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    let temp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io("cannot create a temporary file beside"))?;
    {
        let mut w = BufWriter::new(temp.as_file());
        body(&mut w).map_err(io("cannot write"))?;
        w.flush().map_err(io("cannot write"))?;
    }
    let permissions = existing.unwrap_or_else(|| {
        use std::os::unix::fs::PermissionsExt;
        fs::Permissions::from_mode(0o644)
    });
    temp.as_file()
        .set_permissions(permissions)
        .map_err(io("cannot set permissions on the temporary file for"))?;
    temp.as_file().sync_all().map_err(io("cannot sync"))?;
    temp.persist(path)
        .map_err(|e| io("cannot rename the temporary file over")(e.error))?;
    Ok(())
}
