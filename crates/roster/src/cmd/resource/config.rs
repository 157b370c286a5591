//! User configuration of named output formats: `flux-resource.toml` (or
//! `.json`) in the XDG configuration directories, loaded as flux's
//! `UtilConfig.load()` does (system directories first, the user's last,
//! files in sorted order within a directory, later files win).

use resource_views::{FormatConfig, Subcommand};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// The name of the configuration files (shared with flux, so an existing
/// `~/.config/flux/flux-resource.toml` keeps working).
const NAME: &str = "flux-resource";

/// The directories searched, lowest precedence first.
fn searchpath(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let nonempty = |k: &str| env(k).filter(|v| !v.is_empty());
    let home = nonempty("XDG_CONFIG_HOME").unwrap_or_else(|| {
        let h = nonempty("HOME").unwrap_or_else(|| "/".into());
        format!("{}/.config", h.trim_end_matches('/'))
    });
    let mut dirs = vec![home];
    let system = nonempty("XDG_CONFIG_DIRS").unwrap_or_else(|| "/etc/xdg".into());
    dirs.extend(system.split(':').map(String::from));
    let mut v: Vec<PathBuf> = dirs
        .into_iter()
        .map(|d| PathBuf::from(d).join("flux"))
        .collect();
    v.reverse();
    v
}

fn toml_to_json(v: toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            let mut m = Map::new();
            for (k, v) in t {
                m.insert(k, toml_to_json(v));
            }
            Value::Object(m)
        }
    }
}

/// The configuration files found, in load order.
fn config_files(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in searchpath(env) {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{NAME}.")))
            })
            .collect();
        names.sort();
        files.extend(names);
    }
    files
}

/// Load the formats for `sub`: the built-ins merged with every
/// configuration file.  Errors are flux's texts (they name the file).
pub fn load(sub: Subcommand, env: &dyn Fn(&str) -> Option<String>) -> Result<FormatConfig, String> {
    let mut config = FormatConfig::new(sub);
    for path in config_files(env) {
        let shown = path.to_string_lossy().into_owned();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !matches!(ext, "toml" | "json" | "yaml") {
            continue;
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                let msg = e.to_string();
                let msg = msg.split(" (os error").next().unwrap_or(&msg).to_string();
                return Err(format!("{msg}: '{shown}'"));
            }
        };
        let conf: Value = match ext {
            "toml" => match text.parse::<toml::Table>() {
                Ok(t) => toml_to_json(toml::Value::Table(t)),
                Err(e) => {
                    let m = e.to_string();
                    return Err(format!(
                        "{shown}: {}",
                        m.lines().next().unwrap_or("").trim()
                    ));
                }
            },
            "json" => serde_json::from_str(&text).map_err(|e| format!("{shown}: {e}"))?,
            _ => {
                return Err(format!(
                    "{shown}: YAML configuration is not supported; use {NAME}.toml or {NAME}.json"
                ))
            }
        };
        config
            .merge_file(&shown, &conf)
            .map_err(|e| e.to_string())?;
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use resource_views::{FormatChoice, DRAIN_DEFAULT};

    #[test]
    fn xdg_order() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/u".to_string()),
            "XDG_CONFIG_DIRS" => Some("/a:/b".to_string()),
            _ => None,
        };
        assert_eq!(
            searchpath(&env),
            vec![
                PathBuf::from("/b/flux"),
                PathBuf::from("/a/flux"),
                PathBuf::from("/home/u/.config/flux")
            ]
        );
    }

    #[test]
    fn loads_user_formats_and_reports_bad_keys() {
        let dir = std::env::temp_dir().join(format!("roster-rescfg-{}", std::process::id()));
        let flux = dir.join("flux");
        let _ = std::fs::create_dir_all(&flux);
        let d = dir.to_string_lossy().into_owned();
        let env = move |k: &str| match k {
            "XDG_CONFIG_HOME" => Some(d.clone()),
            "XDG_CONFIG_DIRS" => Some("/nonexistent".to_string()),
            _ => None,
        };
        let _ = std::fs::write(
            flux.join("flux-resource.toml"),
            "[drain.formats.mine]\ndescription = \"mine\"\nformat = \"{nodelist}\"\n",
        );
        let c = load(Subcommand::Drain, &env).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c.get_format_string("mine", &resource_views::no_env),
            Ok(FormatChoice::Format("{nodelist}".into()))
        );
        assert_eq!(
            c.get_format_string("default", &resource_views::no_env),
            Ok(FormatChoice::Format(DRAIN_DEFAULT.into()))
        );
        let _ = std::fs::write(flux.join("flux-resource.toml"), "[bogus]\nx = 1\n");
        let path = flux
            .join("flux-resource.toml")
            .to_string_lossy()
            .into_owned();
        assert_eq!(
            load(Subcommand::Drain, &env).err(),
            Some(format!("{path}: invalid key bogus"))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
