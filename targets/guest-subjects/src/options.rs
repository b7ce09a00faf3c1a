//! The command lines of ringbuf-tool and zil-pmem-tool: operands (the command and its
//! files), then `--name VALUE` options (after a space or `=`) and `--flag`s, each usable
//! once, in any order.

use lexopt::Arg::{Long, Short, Value as Operand};
use lexopt::ValueExt;
use persim_ringbuf::{AccessKind, Strategy};
use std::ffi::OsString;

/// The options given, taken one by one by the command that wants them.
pub struct Options(Vec<(String, Option<String>)>);

impl Options {
    /// The operands and the options, or `None` for `--help`. `valued` names the options
    /// that take a value and `flags` those that do not (without the leading `--`).
    pub fn parse(
        args: impl IntoIterator<Item = OsString>,
        valued: &[&str],
        flags: &[&str],
    ) -> Result<Option<(Vec<String>, Options)>, String> {
        let mut parser = lexopt::Parser::from_args(args);
        let (mut words, mut parsed) = (Vec::new(), Vec::new());
        while let Some(arg) = parser.next().map_err(|e| e.to_string())? {
            match arg {
                Short('h') | Long("help") => return Ok(None),
                Operand(word) => words.push(word.string().map_err(|e| e.to_string())?),
                Long(name) if flags.contains(&name) => parsed.push((format!("--{name}"), None)),
                Long(name) if valued.contains(&name) => {
                    let name = format!("--{name}");
                    let value = parser
                        .value()
                        .map_err(|_| format!("{name} needs a value"))?
                        .string()
                        .map_err(|e| e.to_string())?;
                    parsed.push((name, Some(value)));
                }
                other => return Err(other.unexpected().to_string()),
            }
        }
        Ok(Some((words, Options(parsed))))
    }

    fn take(&mut self, name: &str) -> Option<Option<String>> {
        let at = self.0.iter().position(|(n, _)| n == name)?;
        Some(self.0.remove(at).1)
    }

    pub fn flag(&mut self, name: &str) -> bool {
        self.take(name).is_some()
    }

    /// The value of a required numeric option.
    pub fn number<T: std::str::FromStr>(&mut self, name: &str) -> Result<T, String> {
        self.optional_number(name)?
            .ok_or_else(|| format!("{name} NUMBER is required"))
    }

    /// The value of a numeric option, if given.
    pub fn optional_number<T: std::str::FromStr>(
        &mut self,
        name: &str,
    ) -> Result<Option<T>, String> {
        let Some(value) = self.take(name).flatten() else {
            return Ok(None);
        };
        value
            .parse()
            .map(Some)
            .map_err(|_| format!("{name} `{value}` is not a non-negative integer"))
    }

    /// `--access KIND`, or the widest non-temporal stores this CPU has.
    pub fn access(&mut self) -> Result<AccessKind, String> {
        match self.take("--access").flatten() {
            None => AccessKind::detect(Strategy::NonTemporal).map_err(|e| e.to_string()),
            Some(name) => name
                .parse()
                .map_err(|_| format!("unknown --access `{name}`")),
        }
    }

    /// Refuses options no command asked for.
    pub fn finish(self) -> Result<(), String> {
        match self.0.first() {
            None => Ok(()),
            Some((name, _)) => Err(format!("unknown option `{name}` for this command")),
        }
    }
}
