//! MCP prompts that teach a client when to checkpoint and when to recall, naming the tools
//! this server actually exposes (native, Sage's or Goldfish's).

use rmcp::model::{GetPromptResult, Prompt, PromptMessage, Role};

use crate::tools::ToolSet;

/// The tool names a prompt refers to, the first exposed of each list.
struct Names {
    save: Option<&'static str>,
    restore: Option<&'static str>,
    recall: Option<&'static str>,
    note: Option<&'static str>,
}

impl Names {
    fn of(tools: &ToolSet) -> Names {
        let first = |candidates: &[&'static str]| candidates.iter().copied().find(|n| tools.get(n).is_some());
        Names {
            // A replaced server's names first: its users' prompts already speak of them.
            save: first(&["checkpoint", "save_checkpoint", "checkpoint_save"]),
            restore: first(&["checkpoint", "load_checkpoint", "checkpoint_restore"]),
            recall: first(&["recall_knowledge", "knowledge_recall"]),
            note: first(&["save_knowledge", "knowledge_save"]),
        }
    }
}

const WHEN_TO_CHECKPOINT: &str = "when_to_checkpoint";
const WHEN_TO_RECALL: &str = "when_to_recall";

pub(crate) fn list(tools: &ToolSet) -> Vec<Prompt> {
    let names = Names::of(tools);
    let mut prompts = Vec::new();
    if names.save.is_some() {
        prompts.push(
            Prompt::new(
                WHEN_TO_CHECKPOINT,
                Some("When to save a checkpoint, and when to restore one, with this server's tools."),
                None,
            )
            .with_title("When to checkpoint"),
        );
    }
    if names.recall.is_some() {
        prompts.push(
            Prompt::new(
                WHEN_TO_RECALL,
                Some("When to recall stored knowledge, and what is worth saving as a note."),
                None,
            )
            .with_title("When to recall knowledge"),
        );
    }
    prompts
}

pub(crate) fn get(tools: &ToolSet, name: &str) -> Option<GetPromptResult> {
    let names = Names::of(tools);
    let text = match name {
        WHEN_TO_CHECKPOINT => checkpoint_text(names.save?, names.restore.unwrap_or("the restore tool")),
        WHEN_TO_RECALL => recall_text(names.recall?, names.note),
        _ => return None,
    };
    let description = list(tools).into_iter().find(|p| p.name == name)?.description.unwrap_or_default();
    Some(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]).with_description(description))
}

fn checkpoint_text(save: &str, restore: &str) -> String {
    let tools = if save == restore {
        format!("`{save}` (with a description it saves; with no arguments it restores the latest)")
    } else {
        format!("`{save}` and get them back with `{restore}`")
    };
    format!(
        "You can save checkpoints with {tools}. A checkpoint is how you, \
or another agent after you, picks up exactly where the work stands, so save one at these moments, \
without asking:\n\
- synthesis: several findings just came together into a conclusion or a working answer;\n\
- branch point: you are choosing between approaches, or are about to try a risky one;\n\
- constraint: you learned something that rules options out (a limit, a failing assumption, a requirement);\n\
- transition: a task is finished, or you are switching to another, pausing, or handing over;\n\
- manual: the user asks you to.\n\
Say what stands now in one sentence, list the decisions and achievements as highlights (they accumulate \
in the session), name the files in play and write the next steps as work context. Give confidence \
(0 to 1), sources and open questions when the work is research. Confirm in a few words, \
e.g. \"Checkpointed: <summary>\".\n\
At the start of a session, or when asked \"what was I working on?\", call `{restore}` before anything \
else and continue from what it returns."
    )
}

fn recall_text(recall: &str, note: Option<&str>) -> String {
    let saving = note.map_or(String::new(), |note| {
        format!(
            "\nSave with `{note}` what is worth knowing next time: a fact you had to dig for, a decision \
and its reason, a pitfall and its fix. One idea per note, a stable id, a few keywords; saving the \
same id again makes a new version."
        )
    });
    format!(
        "Stored knowledge is available through `{recall}`. Call it before answering a research or design \
question, when the user mentions a topic that has come up before, and before repeating an investigation: \
pass the question as the query (and the skill or scope you work in). Put what it returns into your \
reasoning and say briefly that you used it; if nothing relevant comes back, go on without it.{saving}"
    )
}
