use state_core::plan::{Mutation, Query, Rule, WriteContext};
use state_core::{Limits, MemoryView, UnixMillis};

use super::rules::*;
use super::*;

/// Plans `rule` on `view` and applies what it decides, as the engine would.
fn apply<R: Rule>(view: &mut MemoryView, rule: R) -> R::Output {
    rule.admit(&Limits::default()).unwrap();
    let ctx = WriteContext { now: UnixMillis(1_000), revision: view.revision };
    let plan = rule.plan(&*view, &ctx).unwrap();
    if plan.advances_revision() {
        view.revision += 1;
    }
    for mutation in plan.mutations {
        match mutation {
            Mutation::Put(entry) => {
                view.entries.insert(entry.key.clone(), entry);
            }
            Mutation::Delete(key) => {
                view.entries.remove(&key);
            }
        }
    }
    plan.outcome
}

fn read(view: &MemoryView, select: Select) -> Graph {
    ReadGraph(select).read(view, UnixMillis(1_000)).unwrap()
}

fn entity(name: &str, kind: &str, observations: &[&str]) -> Entity {
    Entity {
        name: name.into(),
        entity_type: kind.into(),
        observations: observations.iter().map(|o| o.to_string()).collect(),
    }
}

fn relation(from: &str, kind: &str, to: &str) -> Relation {
    Relation { from: from.into(), to: to.into(), relation_type: kind.into() }
}

fn seeded() -> MemoryView {
    let mut view = MemoryView::default();
    let entities = vec![entity("Ada", "person", &["wrote notes"]), entity("Engine", "machine", &[])];
    apply(&mut view, CreateEntities::new(CreateEntitiesArgs { entities }, None));
    let relations = vec![relation("Ada", "programmed", "Engine"), relation("Ada", "knows", "Babbage")];
    apply(&mut view, CreateRelations::new(RelationsArgs { relations }, None));
    view
}

#[test]
fn creating_skips_names_and_relations_already_there() {
    let mut view = seeded();
    let again = vec![entity("Ada", "robot", &[]), entity("Babbage", "person", &[])];
    let created = apply(&mut view, CreateEntities::new(CreateEntitiesArgs { entities: again }, None));
    assert_eq!(created, Written::Done(CreatedEntities { entities: vec![entity("Babbage", "person", &[])] }));
    let relations = vec![relation("Ada", "programmed", "Engine")];
    let created = apply(&mut view, CreateRelations::new(RelationsArgs { relations }, None));
    assert_eq!(created, Written::Done(CreatedRelations { relations: vec![] }));
    assert_eq!(read(&view, Select::All).entities[0].entity_type, "person", "the first Ada stays");
}

#[test]
fn observations_are_added_once_and_a_missing_entity_refuses_the_whole_call() {
    let mut view = seeded();
    let add = |name: &str, contents: &[&str]| ObservationsToAdd {
        entity_name: name.into(),
        contents: contents.iter().map(|c| c.to_string()).collect(),
    };
    let args = AddObservationsArgs { observations: vec![add("Ada", &["wrote notes", "born 1815", "born 1815"])] };
    let added = apply(&mut view, AddObservations::new(args, None));
    let expected = Added { entity_name: "Ada".into(), added_observations: vec!["born 1815".into()] };
    assert_eq!(added, Written::Done(AddedObservations { results: vec![expected] }));
    let revision = view.revision;
    let args = AddObservationsArgs { observations: vec![add("Ada", &["later"]), add("Nobody", &["x"])] };
    assert_eq!(apply(&mut view, AddObservations::new(args, None)), Written::NoSuchEntity("Nobody".into()));
    assert_eq!(view.revision, revision, "nothing was written");
    assert_eq!(read(&view, Select::Named(vec!["Ada".into()])).entities[0].observations, ["wrote notes", "born 1815"]);
}

#[test]
fn deleting_an_entity_deletes_the_relations_at_either_end_and_their_links() {
    let mut view = seeded();
    apply(&mut view, DeleteEntities::new(DeleteEntitiesArgs { entity_names: vec!["Engine".into()] }, None));
    let graph = read(&view, Select::All);
    assert_eq!(graph.entities, vec![entity("Ada", "person", &["wrote notes"])]);
    assert_eq!(graph.relations, vec![relation("Ada", "knows", "Babbage")]);
    assert!(!view.entries.keys().any(|k| k.starts_with(&links_prefix("Engine"))), "Engine's links are gone");
    apply(&mut view, DeleteEntities::new(DeleteEntitiesArgs { entity_names: vec!["Ada".into()] }, None));
    let left: Vec<&String> = view.entries.keys().collect();
    assert!(left.is_empty(), "nothing of the graph is left: {left:?}");
}

#[test]
fn deleting_observations_and_relations_changes_only_what_is_named() {
    let mut view = seeded();
    let deletions = vec![
        ObservationsToDelete { entity_name: "Ada".into(), observations: vec!["wrote notes".into()] },
        ObservationsToDelete { entity_name: "Nobody".into(), observations: vec!["x".into()] },
    ];
    assert_eq!(
        apply(&mut view, DeleteObservations::new(DeleteObservationsArgs { deletions }, None)),
        Written::Done(done("Observations"))
    );
    let relations = vec![relation("Ada", "knows", "Babbage"), relation("No", "such", "relation")];
    apply(&mut view, DeleteRelations::new(RelationsArgs { relations }, None));
    let graph = read(&view, Select::All);
    assert!(graph.entities[0].observations.is_empty());
    assert_eq!(graph.relations, vec![relation("Ada", "programmed", "Engine")]);
}

#[test]
fn reads_select_by_text_or_name_in_creation_order_with_the_relations_touching_them() {
    let view = seeded();
    let found = read(&view, Select::Matching("WROTE".into()));
    assert_eq!(found.entities.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["Ada"]);
    assert_eq!(found.relations.len(), 2, "both of Ada's relations, one to an entity that does not exist");
    let opened = read(&view, Select::Named(vec!["Engine".into(), "Nobody".into()]));
    assert_eq!(opened.entities, vec![entity("Engine", "machine", &[])]);
    assert_eq!(opened.relations, vec![relation("Ada", "programmed", "Engine")]);
    assert_eq!(read(&view, Select::Matching("machine".into())).entities.len(), 1, "types match too");
}

#[test]
fn an_entity_that_would_outgrow_a_value_is_refused() {
    let mut view = seeded();
    let huge = "x".repeat(Limits::default().max_value_bytes);
    let args = AddObservationsArgs {
        observations: vec![ObservationsToAdd { entity_name: "Ada".into(), contents: vec![huge] }],
    };
    assert!(
        matches!(apply(&mut view, AddObservations::new(args, None)), Written::TooLarge(TooLarge { ref entity, .. }) if entity == "Ada")
    );
}

#[test]
fn a_file_is_imported_once_and_merged_into_what_is_there() {
    let mut view = seeded();
    let graph = Graph {
        entities: vec![entity("Ada", "person", &["wrote notes", "imported fact"]), entity("Loom", "machine", &[])],
        relations: vec![relation("Ada", "programmed", "Engine"), relation("Loom", "inspired", "Engine")],
    };
    let args = || ImportArgs { source: "/home/me/memory.jsonl".into(), graph: graph.clone() };
    let first = apply(&mut view, ImportGraph::new(args(), None));
    let Written::Done(first) = first else { panic!("{first:?}") };
    assert!(first.imported);
    assert_eq!((first.entities_created, first.entities_extended, first.relations_created), (1, 1, 1));
    apply(&mut view, DeleteEntities::new(DeleteEntitiesArgs { entity_names: vec!["Loom".into()] }, None));
    let second = apply(&mut view, ImportGraph::new(args(), None));
    assert!(matches!(second, Written::Done(Imported { imported: false, .. })), "{second:?}");
    assert!(read(&view, Select::Named(vec!["Loom".into()])).entities.is_empty(), "a deleted entity stays deleted");
}

#[test]
fn the_file_format_reads_and_writes_that_servers_lines() {
    let text = "{\"type\":\"entity\",\"name\":\"Ada\",\"entityType\":\"person\",\"observations\":[\"a\"]}\n\n\
                {\"type\":\"other\"}\n{\"type\":\"relation\",\"from\":\"Ada\",\"to\":\"B\",\"relationType\":\"knows\"}";
    let graph = jsonl::parse(text).unwrap();
    assert_eq!(graph.entities, vec![entity("Ada", "person", &["a"])]);
    assert_eq!(graph.relations, vec![relation("Ada", "knows", "B")]);
    assert_eq!(jsonl::parse(&jsonl::render(&graph)).unwrap(), graph);
    let bad = jsonl::parse("{\"type\":\"entity\",\"name\":\"A\",\"entityType\":\"t\",\"observations\":[]}\nnot json")
        .unwrap_err();
    assert_eq!(bad.line, 2);
    let missing = jsonl::parse("{\"type\":\"entity\",\"name\":\"A\"}").unwrap_err();
    assert!(missing.message.contains("entityType"), "{missing}");
}

#[test]
fn any_name_makes_a_key_of_fixed_size() {
    let long = "名".repeat(400);
    assert_eq!(entity_key(&long).len(), entity_key("a").len());
    assert_ne!(relation_key(&relation("ab", "c", "d")), relation_key(&relation("a", "bc", "d")));
}
