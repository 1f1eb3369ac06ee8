use std::time::Duration;

use super::*;

#[test]
fn durations_take_units() {
    for (text, millis) in [("250ms", 250), ("30s", 30_000), ("5m", 300_000), ("1h", 3_600_000), ("2", 2_000), ("0s", 0)]
    {
        assert_eq!(parse_duration(text), Ok(Duration::from_millis(millis)), "{text}");
    }
    assert!(parse_duration("5 weeks").unwrap_err().contains("unknown unit"));
    assert!(parse_duration("soon").unwrap_err().contains("not a duration"));
}

#[test]
fn the_owner_is_started_with_this_clients_settings() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        store: StoreArgs,
    }
    let cli = Cli::parse_from([
        "x",
        "--db",
        "/d/s.redb",
        "--owner-idle",
        "90s",
        "--max-value-bytes",
        "2048",
        "--cache-size",
        "1048576",
    ]);
    let launcher = cli.store.owner_launcher(Path::new("/d/s.redb")).unwrap();
    let args: Vec<String> = launcher.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    assert_eq!(
        args,
        [
            "owner",
            "--notify-ready",
            "--db",
            "/d/s.redb",
            "--idle",
            "90000ms",
            "--max-value-bytes",
            "2048",
            "--cache-size",
            "1048576"
        ]
    );
    assert_eq!(
        cli.store.engine.settings(),
        Settings { max_value_bytes: Some(2048), cache_bytes: Some(1_048_576), ..Settings::default() }
    );
}

#[test]
fn every_group_choice_names_a_catalog_group() {
    use clap::ValueEnum;
    for arg in GroupArg::value_variants() {
        let expected = match arg {
            GroupArg::All => ToolGroup::ALL.len(),
            GroupArg::Default | GroupArg::None => 0,
            _ => 1,
        };
        assert_eq!(arg.groups().len(), expected, "{arg:?}");
    }
}

#[test]
fn every_tool_group_can_be_named_on_the_command_line() {
    for group in ToolGroup::ALL {
        let parsed = <GroupArg as clap::ValueEnum>::from_str(group.name(), false);
        assert_eq!(parsed.map(GroupArg::groups), Ok(vec![group]), "--tools {}", group.name());
    }
}

#[test]
fn tool_choices_on_the_command_line() {
    use clap::Parser;
    use state_api::catalog::Operation;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        tools: ToolArgs,
    }
    let options = |args: &[&str]| Cli::try_parse_from([&["x"], args].concat()).map(|cli| cli.tools.options());
    assert_eq!(options(&[]).unwrap(), Options::default());
    assert_eq!(options(&["--tools", "default"]).unwrap(), Options::default());
    let compat = options(&["--compat", "agentcheckpoint"]).unwrap();
    assert_eq!(compat, Options::only([Profile::AgentCheckpoint], []));
    let both = options(&["--compat", "sidecar", "--tools", "default,lease"]).unwrap();
    assert!(both.discover && both.listed == [ToolGroup::Lease] && both.profiles.contains(&Profile::Sidecar));
    for none in ["none", ""] {
        let options = options(&["--tools", none]).unwrap();
        assert!(options.served().is_empty(), "--tools {none:?}");
    }
    let kv = options(&["--tools", "kv"]).unwrap();
    assert!(kv.permits(Operation::StateGet) && !kv.permits(Operation::StateReset) && !kv.discover);
    assert!(options(&["--tools", "kv,nonsense"]).is_err());
}
