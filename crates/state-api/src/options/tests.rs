use crate::catalog::{Operation, Profile, ToolGroup};

use super::{CORE, Options};

#[test]
fn a_default_client_lists_the_core_and_may_call_every_native_operation() {
    let options = Options::default();
    assert!(options.discover);
    assert_eq!(options.listed_at_start(), CORE.to_vec());
    for op in Operation::all() {
        assert_eq!(options.permits(op), op.spec().profile == Profile::Native, "{}", op.id());
    }
    let lease: Vec<_> = options.listed_with(&[ToolGroup::Lease]);
    assert!(lease.contains(&Operation::LeaseAcquire) && lease.contains(&Operation::StateGet));
    let undiscovered = options.groups_to_discover(&[ToolGroup::Lease]);
    assert!(undiscovered.iter().all(|(group, ops)| *group != ToolGroup::Lease && !ops.is_empty()));
    assert!(undiscovered.iter().any(|(group, ops)| *group == ToolGroup::Kv && ops.contains(&Operation::HistoryLog)));
}

#[test]
fn a_profile_alone_serves_only_the_replaced_servers_tools() {
    let options = Options::new([Profile::AgentCheckpoint], []);
    let names: Vec<_> = options.listed_at_start().iter().map(|op| op.name()).collect();
    assert_eq!(names, ["get_state", "set_state", "force_set_state", "list_state", "delete_state"]);
    assert!(!options.permits(Operation::StateReset));
    assert!(!options.permits(Operation::StateGet));
    assert!(!options.discover);
}

#[test]
fn a_server_of_some_groups_covers_the_replaced_servers_shapes_of_them_only() {
    let kv = Options::new([], [ToolGroup::Kv]);
    assert!(kv.covers(Operation::CaxtonStore) && kv.covers(Operation::StateGet));
    assert!(!kv.covers(Operation::SidecarReset) && !kv.covers(Operation::StateReset));
    assert!(Options::default().covers(Operation::SidecarReset));
}

#[test]
fn a_profiles_tool_replaces_the_native_one_of_its_name() {
    let options = Options::new([Profile::Sidecar], [ToolGroup::Kv]);
    let served = options.served();
    assert!(served.contains(&Operation::SidecarStateGet) && !served.contains(&Operation::StateGet));
    assert!(served.contains(&Operation::StateTxn));
    // Still callable under its own id (REST routes are native).
    assert!(options.permits(Operation::StateGet));
    let names: Vec<&str> = served.iter().map(|op| op.name()).collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "one tool per name: {names:?}");
}

#[test]
fn nothing_chosen_is_nothing_served() {
    let options = Options::only([], []);
    assert!(options.served().is_empty());
    assert!(Operation::all().all(|op| !options.permits(op)));
}

#[test]
fn what_may_be_called_survives_the_wire() {
    for options in [Options::default(), Options::new([Profile::Sage], [ToolGroup::Kv]), Options::only([], [])] {
        let sent = serde_json::to_value(&options).unwrap();
        let received: Options = serde_json::from_value(sent).unwrap();
        for op in Operation::all() {
            assert_eq!(received.permits(op), options.permits(op), "{}", op.id());
        }
    }
}
