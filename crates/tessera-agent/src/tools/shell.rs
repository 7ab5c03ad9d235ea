//! `shell_exec` and `shell_view`.
//!
//! A command runs as `sh -c` in the workspace root with stdin closed, in its
//! own process group. Its stdout and stderr are one pipe (as `2>&1` would
//! make them), so the combined output keeps the order it was written in, and
//! a reader thread drains it so it cannot fill up and stall the child. At the
//! timeout the whole group is killed. Output past [`CAPTURE_MAX_BYTES`] is
//! drained and dropped. Every run's full output is saved to `.tessera/shell/<id>.log`
//! and the observation shows its first [`SHOWN_MAX_CHARS`] chars.

use std::fs::{self, File};
use std::io::{BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};
use wait_timeout::ChildExt;

use super::paging::{self, Labels, Limits};
use super::schema::parse_args;
use super::{hint, ToolError, FILE_READ_MAX_BYTES};
use crate::jail::Jail;

/// Folder of the saved logs, relative to the workspace root.
pub(crate) const LOG_DIR: &str = ".tessera/shell";
/// Timeout when the call gives none.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Chars of output shown in the `shell_exec` observation.
pub(crate) const SHOWN_MAX_CHARS: usize = 4000;
/// Lines per `shell_view` page.
pub(crate) const VIEW_MAX_LINES: usize = 200;
/// Bytes of combined output kept; the rest is drained and dropped.
pub(crate) const CAPTURE_MAX_BYTES: usize = 8 * 1024 * 1024;
/// How long to wait for the pipes to close once the shell has exited
/// (a background process may still hold them).
const DRAIN_GRACE: Duration = Duration::from_millis(500);
const DISABLED: &str = "shell tools are disabled for this run (start it with --allow-shell)";

/// `shell_exec` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecArgs {
    command: String,
    #[serde(default)]
    timeout_secs: Option<u64>,
}

/// `shell_view` arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewArgs {
    id: u64,
    #[serde(default = "first_line")]
    start_line: usize,
}

fn first_line() -> usize {
    1
}

/// Shell permission and run numbering.
#[derive(Debug)]
pub(crate) struct Shell {
    enabled: bool,
    default_timeout: Duration,
    /// Id of the next run: one more than the highest log already saved, so a
    /// resumed run never overwrites a log an earlier transcript points to.
    next_id: u64,
}

/// How a command ended.
#[derive(Debug)]
enum Ended {
    Exited(ExitStatus),
    TimedOut(Duration),
}

/// A finished command.
#[derive(Debug)]
struct Outcome {
    ended: Ended,
    output: Vec<u8>,
    /// Some output was dropped past [`CAPTURE_MAX_BYTES`].
    capped: bool,
    /// Background processes still held the pipes after the shell exited.
    lingered: bool,
}

/// What a reader thread sends.
enum Chunk {
    Data(Vec<u8>),
    Capped,
}

impl Shell {
    /// Shell state for `jail`; runs are numbered after the logs already there.
    pub(crate) fn new(jail: &Jail, enabled: bool) -> Shell {
        let next_id = last_log_id(&jail.root().join(LOG_DIR)).saturating_add(1);
        Shell {
            enabled,
            default_timeout: DEFAULT_TIMEOUT,
            next_id,
        }
    }

    /// `shell_exec`.
    pub(crate) fn exec(&mut self, jail: &Jail, arguments: &Value) -> Result<String, ToolError> {
        if !self.enabled {
            return Err(ToolError(DISABLED.to_string()));
        }
        let args: ExecArgs = parse_args("shell_exec", arguments)?;
        let timeout = args.timeout_secs.map_or(self.default_timeout, Duration::from_secs);
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        tracing::debug!(id, command = %args.command, "shell run");
        let outcome =
            run(&args.command, jail.root(), timeout).map_err(|e| ToolError(format!("cannot start sh: {e}")))?;
        let saved = save_log(jail, id, &outcome);
        Ok(report(id, &outcome, saved))
    }

    /// `shell_view`.
    pub(crate) fn view(&self, jail: &Jail, arguments: &Value) -> Result<String, ToolError> {
        if !self.enabled {
            return Err(ToolError(DISABLED.to_string()));
        }
        let args: ViewArgs = parse_args("shell_view", arguments)?;
        let id = args.id;
        let path = jail
            .resolve("id", &format!("{LOG_DIR}/{id}.log"))
            .map_err(|_| ToolError(format!("no saved log for shell run {id}")))?;
        let file = File::open(&path).map_err(|e| ToolError(format!("cannot read the log of run {id}: {e}")))?;
        let limits = Limits {
            lines: VIEW_MAX_LINES,
            bytes: FILE_READ_MAX_BYTES,
        };
        let win = paging::window(BufReader::new(file), args.start_line, limits)
            .map_err(|e| ToolError(format!("cannot read the log of run {id}: {e}")))?
            .ok_or_else(|| ToolError(format!("the log of run {id} holds binary output")))?;
        let name = format!("shell run {id}");
        let labels = Labels {
            name: &name,
            unit: "log",
        };
        paging::render(&labels, &win, |next| {
            hint("shell_view", json!({ "id": id, "start_line": next }))
        })
    }
}

/// The highest `<n>.log` in `dir`, 0 when none.
fn last_log_id(dir: &Path) -> u64 {
    let Ok(read) = fs::read_dir(dir) else { return 0 };
    read.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".log")?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

/// Runs `sh -c command` in `cwd`, killed after `timeout`.
fn run(command: &str, cwd: &Path, timeout: Duration) -> std::io::Result<Outcome> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        // The agent's API key for `--server` is not the command's business.
        .env_remove("TESSERA_API_KEY");
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let (reader, writer) = std::io::pipe()?;
    cmd.stdout(writer.try_clone()?).stderr(writer);
    let mut child = cmd.spawn()?;
    // `cmd` holds the parent's copies of the write end: without this drop the
    // reader would never see end-of-file.
    drop(cmd);
    let (tx, rx) = mpsc::channel();
    spawn_reader(reader, tx);
    let ended = match child.wait_timeout(timeout)? {
        Some(status) => Ended::Exited(status),
        None => {
            kill_group(&mut child);
            child.wait()?;
            Ended::TimedOut(timeout)
        }
    };
    let (output, capped, lingered) = collect(&rx);
    // Whatever the command left running in its group (a server started with
    // `&`, say) ends with the call.
    kill_group(&mut child);
    Ok(Outcome {
        ended,
        output,
        capped,
        lingered,
    })
}

/// Drains the pipe into the channel, keeping at most [`CAPTURE_MAX_BYTES`].
fn spawn_reader(mut pipe: impl Read + Send + 'static, tx: Sender<Chunk>) {
    thread::spawn(move || {
        let mut buf = [0u8; 8192];
        let mut kept = 0;
        let mut capped = false;
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            if !capped && kept + n <= CAPTURE_MAX_BYTES {
                kept += n;
                if tx.send(Chunk::Data(buf[..n].to_vec())).is_err() {
                    return;
                }
            } else if !capped {
                capped = true;
                if tx.send(Chunk::Capped).is_err() {
                    return;
                }
            }
        }
    });
}

/// Receives until the reader is done, or [`DRAIN_GRACE`] has passed;
/// returns the output, whether it was capped, and whether the pipes lingered.
fn collect(rx: &Receiver<Chunk>) -> (Vec<u8>, bool, bool) {
    let deadline = Instant::now() + DRAIN_GRACE;
    let mut output = Vec::new();
    let mut capped = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Chunk::Data(bytes)) => output.extend_from_slice(&bytes),
            Ok(Chunk::Capped) => capped = true,
            Err(RecvTimeoutError::Disconnected) => return (output, capped, false),
            Err(RecvTimeoutError::Timeout) => return (output, capped, true),
        }
    }
}

/// Kills the child's process group (on Unix), then the child itself.
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    {
        // std cannot signal a group; the shell's `kill` builtin can.
        let group = format!("kill -KILL -{} 2>/dev/null", child.id());
        let _ = Command::new("sh").arg("-c").arg(group).stdin(Stdio::null()).status();
    }
    let _ = child.kill();
}

/// Saves the full output; returns the log's display path, or why it failed.
fn save_log(jail: &Jail, id: u64, outcome: &Outcome) -> Result<String, String> {
    let path = jail
        .resolve_new("log", &format!("{LOG_DIR}/{id}.log"))
        .map_err(|e| e.0)?;
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    let mut bytes = outcome.output.clone();
    if outcome.capped {
        bytes.extend_from_slice(format!("\n[output cut: over {CAPTURE_MAX_BYTES} bytes]\n").as_bytes());
    }
    fs::write(&path, bytes).map_err(|e| e.to_string())?;
    Ok(jail.display(&path))
}

/// The `shell_exec` observation.
fn report(id: u64, outcome: &Outcome, saved: Result<String, String>) -> String {
    let mut out = format!("shell run {id}: {}", describe(&outcome.ended));
    if outcome.lingered {
        out.push_str(" (background processes were stopped)");
    }
    let text = String::from_utf8_lossy(&outcome.output);
    let text = text.trim_end();
    let shown = match text.char_indices().nth(SHOWN_MAX_CHARS) {
        Some((end, _)) => &text[..end],
        None => text,
    };
    out.push('\n');
    out.push_str(if text.is_empty() { "(no output)" } else { shown });
    let truncated = shown.len() < text.len() || outcome.capped;
    match saved {
        Ok(_) if truncated => {
            let call = json!({ "id": id });
            out.push_str(&format!("\noutput truncated; full log: shell_view {call}"));
        }
        Ok(_) => {}
        Err(why) => out.push_str(&format!("\n(log not saved: {why})")),
    }
    out
}

/// "exit status 0", "killed by signal 9", "timed out after 5 s and was killed".
fn describe(ended: &Ended) -> String {
    match ended {
        Ended::TimedOut(t) => format!("timed out after {} s and was killed", t.as_secs()),
        Ended::Exited(status) => match status.code() {
            Some(code) => format!("exit status {code}"),
            None => signal(status),
        },
    }
}

#[cfg(unix)]
fn signal(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(sig) => format!("killed by signal {sig}"),
        None => status.to_string(),
    }
}

#[cfg(not(unix))]
fn signal(status: &ExitStatus) -> String {
    status.to_string()
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::tools::Toolbox;

    fn toolbox(allow: bool) -> (tempfile::TempDir, Toolbox) {
        let tmp = tempfile::tempdir().unwrap();
        let jail = Jail::new(tmp.path()).unwrap();
        (tmp, Toolbox::new(jail, allow))
    }

    fn exec(t: &mut Toolbox, args: Value) -> String {
        t.call("shell_exec", &args).unwrap()
    }

    #[test]
    fn disabled_shell_refuses_both_tools() {
        let (tmp, mut t) = toolbox(false);
        let err = t.call("shell_exec", &json!({"command": "touch x"})).unwrap_err();
        assert_eq!(err.0, DISABLED);
        assert!(!tmp.path().join("x").exists());
        assert_eq!(t.call("shell_view", &json!({"id": 1})).unwrap_err().0, DISABLED);
    }

    #[test]
    fn runs_in_the_workspace_and_logs_combined_output() {
        let (tmp, mut t) = toolbox(true);
        fs::write(tmp.path().join("here.txt"), "").unwrap();
        let out = exec(&mut t, json!({"command": "ls; echo oops >&2; exit 3"}));
        assert_eq!(out, "shell run 1: exit status 3\nhere.txt\noops");
        let log = fs::read_to_string(tmp.path().join(".tessera/shell/1.log")).unwrap();
        assert_eq!(log, "here.txt\noops\n");
        let second = exec(&mut t, json!({"command": "true"}));
        assert_eq!(second, "shell run 2: exit status 0\n(no output)");
    }

    #[test]
    fn stdin_is_closed() {
        let (_tmp, mut t) = toolbox(true);
        let out = exec(&mut t, json!({"command": "cat; echo done", "timeout_secs": 5}));
        assert_eq!(out, "shell run 1: exit status 0\ndone");
    }

    #[test]
    fn times_out_and_kills_the_group() {
        let (_tmp, mut t) = toolbox(true);
        let started = Instant::now();
        let out = exec(
            &mut t,
            json!({"command": "echo start; sleep 20; sleep 20", "timeout_secs": 1}),
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        assert_eq!(out, "shell run 1: timed out after 1 s and was killed\nstart");
    }

    #[test]
    fn background_holders_do_not_hang_the_call() {
        let (_tmp, mut t) = toolbox(true);
        let started = Instant::now();
        let out = exec(&mut t, json!({"command": "sleep 20 & echo bg"}));
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        assert_eq!(
            out,
            "shell run 1: exit status 0 (background processes were stopped)\nbg"
        );
    }

    #[test]
    fn long_output_is_cut_and_viewable_in_pages() {
        let (_tmp, mut t) = toolbox(true);
        // 1000 lines "1".."1000": 3,893 bytes; 2000 lines: 8,893 bytes.
        let out = exec(&mut t, json!({"command": "seq 1 2000"}));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "shell run 1: exit status 0");
        assert_eq!(
            lines.last().unwrap(),
            &r#"output truncated; full log: shell_view {"id":1}"#
        );
        let shown: String = lines[1..lines.len() - 1].join("\n");
        assert_eq!(shown.chars().count(), SHOWN_MAX_CHARS);
        assert!(shown.starts_with("1\n2\n3\n"));
        let page = t.call("shell_view", &json!({"id": 1})).unwrap();
        let page: Vec<&str> = page.lines().collect();
        assert_eq!(page[0], "shell run 1: lines 1-200 of 2000");
        assert_eq!(page[200], "200");
        assert_eq!(page[201], r#"more: call shell_view with {"id":1,"start_line":201}"#);
        let last = t.call("shell_view", &json!({"id": 1, "start_line": 2000})).unwrap();
        assert_eq!(last, "shell run 1: lines 2000-2000 of 2000\n2000");
    }

    #[test]
    fn view_of_a_missing_run_is_an_error() {
        let (_tmp, mut t) = toolbox(true);
        let err = t.call("shell_view", &json!({"id": 7})).unwrap_err();
        assert_eq!(err.0, "no saved log for shell run 7");
    }

    #[test]
    fn ids_continue_after_existing_logs() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join(LOG_DIR)).unwrap();
        fs::write(tmp.path().join(LOG_DIR).join("4.log"), "old").unwrap();
        let mut t = Toolbox::new(Jail::new(tmp.path()).unwrap(), true);
        assert!(exec(&mut t, json!({"command": "true"})).starts_with("shell run 5:"));
        assert_eq!(
            fs::read_to_string(tmp.path().join(LOG_DIR).join("4.log")).unwrap(),
            "old"
        );
    }

    #[test]
    fn bad_arguments_name_the_field() {
        let (_tmp, mut t) = toolbox(true);
        let err = t
            .call("shell_exec", &json!({"command": "ls", "timeout_secs": 0}))
            .unwrap_err();
        assert!(
            err.0.contains("field `timeout_secs` must be an integer from 1 to 300"),
            "{err}"
        );
        let err = t.call("shell_exec", &json!({})).unwrap_err();
        assert_eq!(err.0, "invalid arguments for shell_exec: missing field `command`");
    }
}
