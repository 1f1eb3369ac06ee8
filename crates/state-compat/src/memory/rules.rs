//! The memory graph's writes as rules (each read and written in one transaction of the
//! engine, so concurrent writers never lose each other's changes) and its reads as queries
//! of one snapshot. Writes are planned by the core's transaction planner.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use state_core::entry::{Entry, live};
use state_core::ops::once::{Mutating, Once};
use state_core::ops::txn::{TxnOp, TxnRequest};
use state_core::plan::{Plan, Query, Rule, WriteContext};
use state_core::{InvalidInput, Limits, StateView, UnixMillis};

use super::*;

/// How a write ended: done, or refused with nothing changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Written<T> {
    Done(T),
    /// `add_observations` named an entity that does not exist.
    NoSuchEntity(String),
    /// An entity would outgrow the largest value the store takes.
    TooLarge(TooLarge),
}

/// An entity that would outgrow the largest value the store takes, as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TooLarge {
    pub entity: String,
    pub len: usize,
    pub max: usize,
}

/// The graph as the store holds it now, for one write: reads through to the view, and sees
/// this write's own changes.
struct Draft<'v, V: StateView + ?Sized> {
    view: &'v V,
    now: UnixMillis,
    max_value: usize,
    /// Key → its new value (None: deleted), in the order first touched.
    changes: BTreeMap<String, Option<Value>>,
}

impl<'v, V: StateView + ?Sized> Draft<'v, V> {
    fn new(view: &'v V, now: UnixMillis, max_value: usize) -> Self {
        Draft { view, now, max_value, changes: BTreeMap::new() }
    }

    fn read(&self, key: &str) -> Result<Option<Value>, V::Error> {
        if let Some(change) = self.changes.get(key) {
            return Ok(change.clone());
        }
        Ok(live(self.view.get(key)?, self.now).map(|e| e.value))
    }

    fn entity(&self, name: &str) -> Result<Option<Entity>, V::Error> {
        Ok(self.read(&entity_key(name))?.and_then(|v| serde_json::from_value(v).ok()))
    }

    fn has(&self, key: &str) -> Result<bool, V::Error> {
        Ok(self.read(key)?.is_some())
    }

    /// Writes an entity, unless it would be larger than a value may be.
    fn put_entity(&mut self, entity: &Entity) -> Result<(), TooLarge> {
        let value = json!(entity);
        let len = value.to_string().len();
        if len > self.max_value {
            return Err(TooLarge { entity: entity.name.clone(), len, max: self.max_value });
        }
        self.changes.insert(entity_key(&entity.name), Some(value));
        Ok(())
    }

    fn put_relation(&mut self, relation: &Relation) {
        self.changes.insert(relation_key(relation), Some(json!(relation)));
        for end in [&relation.from, &relation.to] {
            self.changes.insert(link_key(end, relation), Some(json!(1)));
        }
    }

    fn delete_relation(&mut self, relation: &Relation) {
        self.changes.insert(relation_key(relation), None);
        for end in [&relation.from, &relation.to] {
            self.changes.insert(link_key(end, relation), None);
        }
    }

    /// The relations with `entity` at either end, through its links.
    fn relations_of(&self, entity: &str) -> Result<Vec<Relation>, V::Error> {
        let prefix = links_prefix(entity);
        let mut digests = Vec::new();
        self.view.scan(&prefix, None, &mut |entry| {
            if live(Some(entry.clone()), self.now).is_some() {
                digests.push(entry.key[prefix.len()..].to_owned());
            }
            true
        })?;
        let mut found = Vec::new();
        for digest in digests {
            let key = format!("{RELATIONS}{digest}");
            if let Some(relation) = self.read(&key)?.and_then(|v| serde_json::from_value::<Relation>(v).ok()) {
                found.push(relation);
            }
        }
        Ok(found)
    }

    /// The plan that writes every change in one transaction, reporting `outcome`.
    fn commit<T>(self, outcome: T, ctx: &WriteContext, request_id: Option<&str>) -> Result<Plan<T>, V::Error> {
        let mut success = Vec::new();
        for (key, change) in self.changes {
            let stored = self.view.get(&key)?;
            match change {
                Some(value) => success.push(TxnOp::Put { key, value, ttl_seconds: None }),
                // Deleting what is not there would only add a not-found result.
                None if live(stored, ctx.now).is_some() => success.push(TxnOp::Delete { key }),
                None => {}
            }
        }
        let request = TxnRequest { success, request_id: request_id.map(str::to_owned), ..TxnRequest::default() };
        let plan = state_core::kv::plan_txn(self.view, &request, ctx)?;
        Ok(Plan { outcome, mutations: plan.mutations, events: plan.events })
    }
}

/// Fields every write rule has: its idempotency key, and the largest value, learnt at admit.
#[derive(Debug, Default, Serialize)]
struct Common {
    request_id: Option<String>,
    #[serde(skip)]
    max_value: OnceLock<usize>,
}

impl Common {
    fn new(request_id: Option<String>) -> Common {
        Common { request_id, max_value: OnceLock::new() }
    }

    fn admit<R: Mutating>(&self, rule: &R, limits: &Limits) -> Result<Option<Once>, InvalidInput> {
        let _ = self.max_value.set(limits.max_value_bytes);
        Once::of(rule)
    }

    fn max_value(&self) -> usize {
        self.max_value.get().copied().unwrap_or(Limits::default().max_value_bytes)
    }
}

macro_rules! memory_rules {
    ($($rule:ident($args:ty) => $kind:literal),* $(,)?) => {
        $(
            #[derive(Debug, Serialize)]
            pub struct $rule {
                args: $args,
                #[serde(flatten)]
                common: Common,
            }

            impl $rule {
                pub fn new(args: $args, request_id: Option<String>) -> $rule {
                    $rule { args, common: Common::new(request_id) }
                }
            }

            impl Mutating for $rule {
                const KIND: &'static str = $kind;
                fn request_id(&self) -> Option<&str> {
                    self.common.request_id.as_deref()
                }
            }
        )*
    };
}

memory_rules!(
    CreateEntities(CreateEntitiesArgs) => "memory/create_entities",
    CreateRelations(RelationsArgs) => "memory/create_relations",
    AddObservations(AddObservationsArgs) => "memory/add_observations",
    DeleteEntities(DeleteEntitiesArgs) => "memory/delete_entities",
    DeleteObservations(DeleteObservationsArgs) => "memory/delete_observations",
    DeleteRelations(RelationsArgs) => "memory/delete_relations",
    ImportGraph(ImportArgs) => "memory/import",
);

/// Writes an entity, or ends the planner with the refusal (nothing changed).
macro_rules! put_or_refuse {
    ($draft:expr, $entity:expr) => {
        if let Err(too_large) = $draft.put_entity($entity) {
            return Ok(Plan { outcome: Written::TooLarge(too_large), mutations: Vec::new(), events: Vec::new() });
        }
    };
}

impl Rule for CreateEntities {
    type Output = Written<CreatedEntities>;

    fn admit(&self, limits: &Limits) -> Result<Option<Once>, InvalidInput> {
        self.common.admit(self, limits)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<Self::Output>, V::Error> {
        let mut draft = Draft::new(view, ctx.now, self.common.max_value());
        let mut created = Vec::new();
        for entity in &self.args.entities {
            if draft.has(&entity_key(&entity.name))? {
                continue;
            }
            put_or_refuse!(draft, entity);
            created.push(entity.clone());
        }
        draft.commit(Written::Done(CreatedEntities { entities: created }), ctx, self.common.request_id.as_deref())
    }
}

impl Rule for CreateRelations {
    type Output = Written<CreatedRelations>;

    fn admit(&self, limits: &Limits) -> Result<Option<Once>, InvalidInput> {
        self.common.admit(self, limits)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<Self::Output>, V::Error> {
        let mut draft = Draft::new(view, ctx.now, self.common.max_value());
        let mut created = Vec::new();
        for relation in &self.args.relations {
            if draft.has(&relation_key(relation))? {
                continue;
            }
            draft.put_relation(relation);
            created.push(relation.clone());
        }
        draft.commit(Written::Done(CreatedRelations { relations: created }), ctx, self.common.request_id.as_deref())
    }
}

impl Rule for AddObservations {
    type Output = Written<AddedObservations>;

    fn admit(&self, limits: &Limits) -> Result<Option<Once>, InvalidInput> {
        self.common.admit(self, limits)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<Self::Output>, V::Error> {
        let mut draft = Draft::new(view, ctx.now, self.common.max_value());
        let mut results = Vec::new();
        for addition in &self.args.observations {
            let Some(mut entity) = draft.entity(&addition.entity_name)? else {
                // That server refused the whole call, saving nothing: so does this.
                return Ok(Plan {
                    outcome: Written::NoSuchEntity(addition.entity_name.clone()),
                    mutations: Vec::new(),
                    events: Vec::new(),
                });
            };
            let mut added = Vec::new();
            for content in &addition.contents {
                if !entity.observations.contains(content) {
                    entity.observations.push(content.clone());
                    added.push(content.clone());
                }
            }
            if !added.is_empty() {
                put_or_refuse!(draft, &entity);
            }
            results.push(Added { entity_name: addition.entity_name.clone(), added_observations: added });
        }
        draft.commit(Written::Done(AddedObservations { results }), ctx, self.common.request_id.as_deref())
    }
}

impl Rule for DeleteEntities {
    type Output = Written<Done>;

    fn admit(&self, limits: &Limits) -> Result<Option<Once>, InvalidInput> {
        self.common.admit(self, limits)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<Self::Output>, V::Error> {
        let mut draft = Draft::new(view, ctx.now, self.common.max_value());
        for name in &self.args.entity_names {
            for relation in draft.relations_of(name)? {
                draft.delete_relation(&relation);
            }
            draft.changes.insert(entity_key(name), None);
        }
        draft.commit(Written::Done(done("Entities")), ctx, self.common.request_id.as_deref())
    }
}

impl Rule for DeleteObservations {
    type Output = Written<Done>;

    fn admit(&self, limits: &Limits) -> Result<Option<Once>, InvalidInput> {
        self.common.admit(self, limits)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<Self::Output>, V::Error> {
        let mut draft = Draft::new(view, ctx.now, self.common.max_value());
        for deletion in &self.args.deletions {
            // An entity that does not exist is passed over, as that server did.
            let Some(mut entity) = draft.entity(&deletion.entity_name)? else { continue };
            let before = entity.observations.len();
            entity.observations.retain(|o| !deletion.observations.contains(o));
            if entity.observations.len() != before {
                put_or_refuse!(draft, &entity);
            }
        }
        draft.commit(Written::Done(done("Observations")), ctx, self.common.request_id.as_deref())
    }
}

impl Rule for DeleteRelations {
    type Output = Written<Done>;

    fn admit(&self, limits: &Limits) -> Result<Option<Once>, InvalidInput> {
        self.common.admit(self, limits)
    }

    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<Self::Output>, V::Error> {
        let mut draft = Draft::new(view, ctx.now, self.common.max_value());
        for relation in &self.args.relations {
            if draft.has(&relation_key(relation))? {
                draft.delete_relation(relation);
            }
        }
        draft.commit(Written::Done(done("Relations")), ctx, self.common.request_id.as_deref())
    }
}

impl Rule for ImportGraph {
    type Output = Written<Imported>;

    fn admit(&self, limits: &Limits) -> Result<Option<Once>, InvalidInput> {
        if self.args.source.is_empty() {
            return Err(InvalidInput::Malformed {
                argument: "source".into(),
                message: "name the file imported".into(),
            });
        }
        self.common.admit(self, limits)
    }

    /// Merges the file's graph: entities new by name are created, existing ones gain the
    /// observations they lack, missing relations are created; then the source is recorded,
    /// all in one transaction, so a file is imported once however many processes start on it.
    fn plan<V: StateView + ?Sized>(&self, view: &V, ctx: &WriteContext) -> Result<Plan<Self::Output>, V::Error> {
        let mut imported = Imported {
            imported: false,
            source: self.args.source.clone(),
            entities_created: 0,
            entities_extended: 0,
            relations_created: 0,
        };
        let marker = import_key(&self.args.source);
        let mut draft = Draft::new(view, ctx.now, self.common.max_value());
        if draft.has(&marker)? {
            return Ok(Plan { outcome: Written::Done(imported), mutations: Vec::new(), events: Vec::new() });
        }
        for entity in &self.args.graph.entities {
            match draft.entity(&entity.name)? {
                None => {
                    put_or_refuse!(draft, entity);
                    imported.entities_created += 1;
                }
                Some(mut stored) => {
                    let missing: Vec<String> =
                        entity.observations.iter().filter(|o| !stored.observations.contains(o)).cloned().collect();
                    if !missing.is_empty() {
                        stored.observations.extend(missing);
                        put_or_refuse!(draft, &stored);
                        imported.entities_extended += 1;
                    }
                }
            }
        }
        for relation in &self.args.graph.relations {
            if !draft.has(&relation_key(relation))? {
                draft.put_relation(relation);
                imported.relations_created += 1;
            }
        }
        imported.imported = true;
        let record = json!({
            "source": self.args.source,
            "imported_at": ctx.now.to_rfc3339(),
            "entities_created": imported.entities_created,
            "entities_extended": imported.entities_extended,
            "relations_created": imported.relations_created,
        });
        draft.changes.insert(marker, Some(record));
        draft.commit(Written::Done(imported), ctx, self.common.request_id.as_deref())
    }
}

/// Which entities a read returns.
#[derive(Debug, Clone)]
pub enum Select {
    All,
    /// Those whose name, type or an observation contains this, ignoring case.
    Matching(String),
    /// Those with these names.
    Named(Vec<String>),
}

/// A read of the graph from one snapshot: the entities selected, in the order they were
/// created, and the relations with a selected entity at either end (every relation, for
/// `All`).
#[derive(Debug, Clone)]
pub struct ReadGraph(pub Select);

impl Query for ReadGraph {
    type Output = Graph;

    fn read<V: StateView + ?Sized>(&self, view: &V, now: UnixMillis) -> Result<Graph, V::Error> {
        let mut entities: Vec<(u64, Entity)> = Vec::new();
        let mut keep = |entry: Entry| {
            if let Some(entry) = live(Some(entry), now)
                && let Ok(entity) = serde_json::from_value::<Entity>(entry.value)
            {
                entities.push((entry.create_revision, entity));
            }
        };
        match &self.0 {
            Select::Named(names) => {
                let unique: BTreeSet<&String> = names.iter().collect();
                for name in unique {
                    if let Some(entry) = view.get(&entity_key(name))? {
                        keep(entry);
                    }
                }
            }
            Select::All | Select::Matching(_) => view.scan(ENTITIES, None, &mut |entry| {
                keep(entry);
                true
            })?,
        }
        if let Select::Matching(query) = &self.0 {
            let query = query.to_lowercase();
            let has = |text: &str| text.to_lowercase().contains(&query);
            entities.retain(|(_, e)| has(&e.name) || has(&e.entity_type) || e.observations.iter().any(|o| has(o)));
        }
        entities.sort_by(|(a, x), (b, y)| a.cmp(b).then_with(|| x.name.cmp(&y.name)));
        let names: BTreeSet<&str> = entities.iter().map(|(_, e)| e.name.as_str()).collect();
        let mut relations: Vec<(u64, Relation)> = Vec::new();
        view.scan(RELATIONS, None, &mut |entry| {
            if let Some(entry) = live(Some(entry), now)
                && let Ok(relation) = serde_json::from_value::<Relation>(entry.value)
                && (matches!(self.0, Select::All)
                    || names.contains(relation.from.as_str())
                    || names.contains(relation.to.as_str()))
            {
                relations.push((entry.create_revision, relation));
            }
            true
        })?;
        relations.sort_by(|(a, x), (b, y)| {
            a.cmp(b).then_with(|| (&x.from, &x.to, &x.relation_type).cmp(&(&y.from, &y.to, &y.relation_type)))
        });
        Ok(Graph {
            entities: entities.into_iter().map(|(_, e)| e).collect(),
            relations: relations.into_iter().map(|(_, r)| r).collect(),
        })
    }
}
