//! Follow `resource.journal` and print each event as a JSON line.
//!
//! ```text
//! cargo run -p roster-client --example journal -- [URI] [TOKEN_FILE]
//! ```
//!
//! URI defaults to `$ROSTER_URI`, else the default socket; the token file
//! to `$ROSTER_TOKEN_FILE`.  Stops at the end of the stream or on error.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let uri = args.first().map(String::as_str);
    let token = args.get(1).map(Path::new);
    let client = match client::blocking::Client::from_env(uri, token) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("journal: {e}");
            return ExitCode::FAILURE;
        }
    };
    let journal = match client.journal() {
        Ok(j) => j,
        Err(e) => {
            eprintln!("journal: {e}");
            return ExitCode::FAILURE;
        }
    };
    for update in journal {
        let update = match update {
            Ok(u) => u,
            Err(e) => {
                eprintln!("journal: {e}");
                return ExitCode::FAILURE;
            }
        };
        let events = update["events"].as_array().cloned().unwrap_or_default();
        if events.is_empty() {
            // The sentinel between the backlog and live events.
            eprintln!("journal: (end of backlog)");
        }
        for e in events {
            println!("{e}");
        }
    }
    ExitCode::SUCCESS
}
