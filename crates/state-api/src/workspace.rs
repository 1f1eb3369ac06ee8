//! What only the caller's side of the seam knows: its working directory and that directory's
//! git branch. A checkpoint saved without a workspace belongs to the directory of the process
//! the call was made in (the agent's `state-mcp`, or `state-http` for REST callers), not to
//! the owner's, which runs detached elsewhere. Filled in before the call leaves the process.

use std::path::{Path, PathBuf};

use crate::catalog::Operation;
use serde_json::Value;
use state_compat::goldfish;

/// The argument names an operation uses for the workspace and the branch, when it defaults
/// them: `(workspace, branch)`; `branch` is `None` where the call saves nothing.
fn defaulted(op: Operation, args: &Value) -> Option<(&'static str, Option<&'static str>)> {
    match op {
        Operation::CheckpointSave => Some(("workspace", Some("git_branch"))),
        Operation::SageSaveCheckpoint => Some(("workspace", None)),
        Operation::CheckpointRestore => Some(("workspace", None)),
        Operation::GoldfishCheckpoint => {
            let parsed: goldfish::CheckpointArgs = serde_json::from_value(args.clone()).ok()?;
            match goldfish::action(&parsed).ok()? {
                goldfish::Action::Save => Some(("workspace", Some("gitBranch"))),
                goldfish::Action::Restore => Some(("workspace", None)),
                goldfish::Action::Search | goldfish::Action::Timeline => None,
            }
        }
        _ => None,
    }
}

/// `args` with the workspace (this process's working directory) and git branch filled in
/// where the operation defaults them and the caller left them out.
pub(crate) fn fill(op: Operation, mut args: Value) -> Value {
    let Some((workspace_arg, branch_arg)) = defaulted(op, &args) else { return args };
    let Some(map) = args.as_object_mut() else { return args };
    if !map.contains_key(workspace_arg)
        && let Ok(cwd) = std::env::current_dir()
    {
        map.insert(workspace_arg.to_owned(), Value::String(cwd.display().to_string()));
    }
    if let Some(branch_arg) = branch_arg
        && !map.contains_key(branch_arg)
        && let Some(branch) = map.get(workspace_arg).and_then(Value::as_str).and_then(|w| git_branch(Path::new(w)))
    {
        map.insert(branch_arg.to_owned(), Value::String(branch));
    }
    args
}

/// The branch checked out in the repository containing `dir`, read from `HEAD` (no git
/// binary needed): `main`, or `detached@<12 hex>` when no branch is checked out. Linked
/// worktrees, whose `.git` is a file pointing at their git directory, are followed.
pub fn git_branch(dir: &Path) -> Option<String> {
    let git_dir = dir.ancestors().find_map(|d| git_dir_of(&d.join(".git")))?;
    let head = std::fs::read_to_string(git_dir.join("HEAD")).ok()?;
    let head = head.trim();
    match head.strip_prefix("ref:") {
        Some(reference) => {
            let reference = reference.trim();
            Some(reference.strip_prefix("refs/heads/").unwrap_or(reference).to_owned())
        }
        None if head.len() >= 12 && head.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(format!("detached@{}", &head[..12]))
        }
        None => None,
    }
}

fn git_dir_of(dot_git: &Path) -> Option<PathBuf> {
    if dot_git.is_dir() {
        return Some(dot_git.to_owned());
    }
    let pointer = std::fs::read_to_string(dot_git).ok()?;
    let target = pointer.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let target = Path::new(target);
    Some(if target.is_absolute() { target.to_owned() } else { dot_git.parent()?.join(target) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branches_of_a_repository_a_worktree_and_a_detached_head() {
        let root = tempfile::tempdir().expect("temp dir");
        let repo = root.path().join("repo");
        std::fs::create_dir_all(repo.join(".git/worktrees/wt")).expect("dirs");
        std::fs::create_dir_all(repo.join("src/deep")).expect("dirs");
        std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/feature/x\n").expect("HEAD");
        assert_eq!(git_branch(&repo).as_deref(), Some("feature/x"));
        assert_eq!(git_branch(&repo.join("src/deep")).as_deref(), Some("feature/x"), "found from a subdirectory");

        let worktree = root.path().join("wt");
        std::fs::create_dir_all(&worktree).expect("dirs");
        std::fs::write(worktree.join(".git"), "gitdir: ../repo/.git/worktrees/wt\n").expect(".git file");
        std::fs::write(repo.join(".git/worktrees/wt/HEAD"), "ref: refs/heads/fix\n").expect("HEAD");
        assert_eq!(git_branch(&worktree).as_deref(), Some("fix"));

        std::fs::write(repo.join(".git/HEAD"), "0123456789abcdef0123456789abcdef01234567\n").expect("HEAD");
        assert_eq!(git_branch(&repo).as_deref(), Some("detached@0123456789ab"));
        assert_eq!(git_branch(&root.path().join("nowhere")), None);
    }

    #[test]
    fn fills_only_what_the_caller_left_out() {
        let filled = fill(Operation::CheckpointSave, serde_json::json!({"description": "d"}));
        assert!(filled["workspace"].is_string());
        let kept = fill(Operation::CheckpointSave, serde_json::json!({"description": "d", "workspace": "/w"}));
        assert_eq!(kept["workspace"], "/w");
        let untouched = fill(Operation::GoldfishCheckpoint, serde_json::json!({"query": "q"}));
        assert!(untouched.get("workspace").is_none(), "a search spans every workspace unless asked");
    }
}
