//! Instructions a process executes, counted by valgrind's callgrind. On a
//! shared machine CPU time moves by ±30 % with the neighbours' load; the
//! count of instructions for the same work does not, so ratios between
//! variants measured this way are steady from run to run.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// A process started under [`Callgrind::wrapper`].
#[derive(Debug)]
pub struct Callgrind {
    pid: u32,
    dir: PathBuf,
}

impl Callgrind {
    /// The command line to put before the program: callgrind, counting
    /// from the start, its dumps written to `dir`.
    pub fn wrapper(dir: &Path) -> Vec<String> {
        vec![
            "valgrind".into(),
            "--tool=callgrind".into(),
            format!(
                "--callgrind-out-file={}",
                dir.join("callgrind.out").display()
            ),
        ]
    }

    /// The wrapped process `pid`, whose dumps go to `dir`.
    pub fn attach(pid: u32, dir: &Path) -> Callgrind {
        Callgrind {
            pid,
            dir: dir.to_path_buf(),
        }
    }

    /// Zeroes the counters.
    pub fn zero(&self) -> Result<()> {
        self.control("-z")
    }

    /// Dumps the counters and returns the instructions executed since the
    /// last [`Callgrind::zero`].
    pub fn instructions(&self) -> Result<u64> {
        self.control("-d")?;
        // Dumps are numbered callgrind.out.1, .2, …: read the newest.
        let newest = std::fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let n: u64 = name.strip_prefix("callgrind.out.")?.parse().ok()?;
                Some((n, e.path()))
            })
            .max()
            .context("callgrind wrote no dump")?;
        let text = std::fs::read_to_string(&newest.1)?;
        text.lines()
            .find_map(|l| l.strip_prefix("summary:"))
            .context("no summary line in the callgrind dump")?
            .trim()
            .parse()
            .context("the callgrind summary is not a number")
    }

    fn control(&self, flag: &str) -> Result<()> {
        let out = Command::new("callgrind_control")
            .arg(flag)
            .arg(self.pid.to_string())
            .output()
            .context("callgrind_control (from valgrind) is not installed")?;
        if !out.status.success() {
            bail!(
                "callgrind_control {flag} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}
