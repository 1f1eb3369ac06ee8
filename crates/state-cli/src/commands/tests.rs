//! The commands and the catalog agree: every operation that declares a command has it, and
//! every command runs the operation that declares it.

use clap::{CommandFactory, Parser};
use state_api::catalog::{Cli as Offered, Operation};

use super::*;
use crate::{Cli, TopCommand};

/// Commands that are not one operation's: they drive the store another way.
const NOT_OPERATIONS: [&str; 6] = ["tui", "backup", "doctor", "recover", "call", "generate"];

/// Commands that drive one operation over many calls (streaming, paging), so `operation`
/// gives no single call for them.
const DRIVEN: [(&str, Operation); 3] =
    [("watch", Operation::StateWatch), ("export", Operation::StoreExport), ("import", Operation::StoreImport)];

/// Every runnable command's words, e.g. `["workflow", "claim"]`.
fn leaves(command: &clap::Command, path: Vec<String>, out: &mut Vec<(Vec<String>, clap::Command)>) {
    let children: Vec<_> = command.get_subcommands().filter(|c| !c.is_hide_set() && c.get_name() != "help").collect();
    if children.is_empty() && !path.is_empty() {
        out.push((path.clone(), command.clone()));
    }
    for child in children {
        let mut next = path.clone();
        next.push(child.get_name().to_owned());
        leaves(child, next, out);
    }
}

/// An invocation of `words` with every positional and every required option given: `1`
/// reads as a key, a number, a duration or JSON alike; a file argument gets a real file.
fn invocation(words: &[String], command: &clap::Command, file: &str) -> Vec<String> {
    let mut argv: Vec<String> = std::iter::once("statectl".to_owned()).chain(words.iter().cloned()).collect();
    for arg in command.get_arguments() {
        let value = if arg.get_id() == "file" { file.to_owned() } else { "1".to_owned() };
        if arg.is_positional() {
            argv.push(value);
        } else if arg.is_required_set() {
            argv.push(format!("--{}", arg.get_long().unwrap_or(arg.get_id().as_str())));
            argv.push(value);
        }
    }
    argv
}

#[test]
fn every_command_runs_the_operation_that_declares_it() {
    let dir = std::env::temp_dir().join(format!("statectl-commands-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("txn.json");
    std::fs::write(&file, "{}").unwrap();
    let mut found = Vec::new();
    leaves(&Cli::command(), Vec::new(), &mut found);
    let mut covered = Vec::new();
    for (words, command) in &found {
        let path = words.join(" ");
        if NOT_OPERATIONS.contains(&path.as_str()) {
            continue;
        }
        let op = match DRIVEN.iter().find(|(driven, _)| *driven == path) {
            Some((_, op)) => *op,
            None => {
                let argv = invocation(words, command, &file.display().to_string());
                let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?} does not parse: {e}"));
                let TopCommand::Store(parsed) = cli.command else { panic!("`{path}` is not a store command") };
                operation(&parsed).unwrap_or_else(|e| panic!("`{path}` builds no call: {e}")).0
            }
        };
        let declared = match op.spec().cli {
            Offered::Command(declared) => declared,
            Offered::CallOnly(_) => "(none)",
        };
        assert_eq!(declared, path, "`statectl {path}` runs `{}`, which declares another command", op.id());
        covered.push(op);
    }
    for op in Operation::all() {
        if let Offered::Command(path) = op.spec().cli {
            assert!(covered.contains(&op), "`{}` declares `statectl {path}`, which does not exist", op.id());
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
