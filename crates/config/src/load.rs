//! Reading TOML files and directories, merging, and remembering which file
//! defined each key.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{ConfigError, ErrorKind};

/// Parsed and merged TOML plus the file each key came from.
#[derive(Debug, Default)]
pub(crate) struct Source {
    pub table: toml::Table,
    /// Dotted key path (`resource`, `resource.path`, `resource.groups.x`)
    /// to the file that defined it; for a table spread over several
    /// files, the first one.
    pub origins: HashMap<String, String>,
    /// Files read, in order.
    pub files: Vec<PathBuf>,
}

impl Source {
    /// The origin of `path`, else of its closest ancestor.
    pub fn origin(&self, path: &str) -> Option<&str> {
        let mut p = path;
        loop {
            if let Some(o) = self.origins.get(p) {
                return Some(o.as_str());
            }
            p = p.rsplit_once('.')?.0;
        }
    }
}

pub(crate) use rpc::errno::io_text;

pub(crate) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .get(..offset.min(text.len()))
        .map_or(1, |b| b.iter().filter(|&&c| c == b'\n').count() + 1)
}

/// Parse one TOML document.
pub(crate) fn parse_text(text: &str, origin: &str) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>().map_err(|e| {
        ConfigError::new(
            Some(origin),
            ErrorKind::Syntax {
                line: e.span().map(|sp| line_of(text, sp.start)),
                message: e.message().trim_end().to_string(),
            },
        )
    })
}

fn read_file(path: &Path) -> Result<toml::Table, ConfigError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(Some(&name), ErrorKind::Read(io_text(&e))))?;
    parse_text(&text, &name)
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

fn record(v: &toml::Value, path: &str, file: &str, origins: &mut HashMap<String, String>) {
    origins
        .entry(path.to_string())
        .or_insert_with(|| file.to_string());
    if let toml::Value::Table(t) = v {
        for (k, sub) in t {
            record(sub, &join(path, k), file, origins);
        }
    }
}

/// Merge `from` (read from `file`) into `into`: tables merge recursively,
/// any other key defined on both sides is an error naming both files.
fn merge(
    into: &mut toml::Table,
    from: toml::Table,
    file: &str,
    prefix: &str,
    origins: &mut HashMap<String, String>,
) -> Result<(), ConfigError> {
    for (k, v) in from {
        let path = join(prefix, &k);
        match (into.get_mut(&k), v) {
            (None, v) => {
                record(&v, &path, file, origins);
                into.insert(k, v);
            }
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => {
                merge(a, b, file, &path, origins)?;
            }
            (Some(_), _) => {
                let first = origins.get(&path).cloned().unwrap_or_default();
                return Err(ConfigError::new(
                    Some(file),
                    ErrorKind::Duplicate { key: path, first },
                ));
            }
        }
    }
    Ok(())
}

/// Load a single document given as text.
pub(crate) fn load_str(text: &str, origin: &str) -> Result<Source, ConfigError> {
    let table = parse_text(text, origin)?;
    let mut src = Source::default();
    merge(&mut src.table, table, origin, "", &mut src.origins)?;
    Ok(src)
}

/// Load a file, or every `*.toml` file of a directory in name order
/// (file names starting with a dot are skipped, as a shell glob would).
pub(crate) fn load_path(path: &Path) -> Result<Source, ConfigError> {
    let name = path.display().to_string();
    let meta = std::fs::metadata(path)
        .map_err(|e| ConfigError::new(Some(&name), ErrorKind::Read(io_text(&e))))?;
    let files = if meta.is_dir() {
        let rd = std::fs::read_dir(path)
            .map_err(|e| ConfigError::new(Some(&name), ErrorKind::Read(io_text(&e))))?;
        let mut files = Vec::new();
        for ent in rd {
            let ent =
                ent.map_err(|e| ConfigError::new(Some(&name), ErrorKind::Read(io_text(&e))))?;
            let fname = ent.file_name();
            let fname = fname.to_string_lossy();
            if fname.ends_with(".toml") && !fname.starts_with('.') {
                files.push(ent.path());
            }
        }
        files.sort_by(|a, b| {
            a.as_os_str()
                .as_encoded_bytes()
                .cmp(b.as_os_str().as_encoded_bytes())
        });
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut src = Source::default();
    for f in files {
        let t = read_file(&f)?;
        merge(
            &mut src.table,
            t,
            &f.display().to_string(),
            "",
            &mut src.origins,
        )?;
        src.files.push(f);
    }
    Ok(src)
}
