//! The memory server's tools over the seam: writes as one rule each, reads as one query.

use super::rules::{
    AddObservations, CreateEntities, CreateRelations, DeleteEntities, DeleteObservations, DeleteRelations, ImportGraph,
    ReadGraph, Select, TooLarge, Written,
};
use super::*;
use crate::seam::{Answer, Answered, Failure, Seam};
use state_core::InvalidInput;
use state_core::limits::check_count;

/// The most items (entities, relations, names, additions, deletions) one call may carry: a
/// call is one transaction of the writer every client shares.
pub const MAX_ITEMS: usize = 1000;

/// The most items a memory file may carry to be imported (its graph is merged at once).
pub const MAX_IMPORT_ITEMS: usize = 100_000;

fn bounded<E>(argument: &str, len: usize, max: usize) -> Result<(), Failure<E>> {
    check_count(argument, len, max).map_err(Failure::Invalid)
}

fn answer<T: Serialize, E>(written: Written<T>) -> Answered<E> {
    match written {
        Written::Done(shape) => Answer::shaped(&shape),
        // That server's own words for it.
        Written::NoSuchEntity(name) => Err(Failure::NotFound(format!("Entity with name {name} not found"))),
        Written::TooLarge(TooLarge { entity, len, max }) => Err(Failure::Invalid(InvalidInput::Malformed {
            argument: "observations".into(),
            message: format!(
                "entity `{}` would be {len} bytes as JSON, over this store's limit of {max} bytes for one value \
                 (the memory server had none): start the store's owner with a larger --max-value-bytes, or keep \
                 fewer or shorter observations on one entity",
                shortened(&entity)
            ),
        })),
    }
}

/// A name as an error message shows it: at most 80 characters.
fn shortened(name: &str) -> String {
    match name.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &name[..cut]),
        None => name.to_owned(),
    }
}

pub async fn create_entities<S: Seam>(seam: &S, a: CreateEntitiesArgs, id: Option<String>) -> Answered<S::Error> {
    bounded("entities", a.entities.len(), MAX_ITEMS)?;
    answer(seam.apply(CreateEntities::new(a, id)).await?)
}

pub async fn create_relations<S: Seam>(seam: &S, a: RelationsArgs, id: Option<String>) -> Answered<S::Error> {
    bounded("relations", a.relations.len(), MAX_ITEMS)?;
    answer(seam.apply(CreateRelations::new(a, id)).await?)
}

pub async fn add_observations<S: Seam>(seam: &S, a: AddObservationsArgs, id: Option<String>) -> Answered<S::Error> {
    bounded("observations", a.observations.len(), MAX_ITEMS)?;
    answer(seam.apply(AddObservations::new(a, id)).await?)
}

pub async fn delete_entities<S: Seam>(seam: &S, a: DeleteEntitiesArgs, id: Option<String>) -> Answered<S::Error> {
    bounded("entityNames", a.entity_names.len(), MAX_ITEMS)?;
    answer(seam.apply(DeleteEntities::new(a, id)).await?)
}

pub async fn delete_observations<S: Seam>(
    seam: &S,
    a: DeleteObservationsArgs,
    id: Option<String>,
) -> Answered<S::Error> {
    bounded("deletions", a.deletions.len(), MAX_ITEMS)?;
    answer(seam.apply(DeleteObservations::new(a, id)).await?)
}

pub async fn delete_relations<S: Seam>(seam: &S, a: RelationsArgs, id: Option<String>) -> Answered<S::Error> {
    bounded("relations", a.relations.len(), MAX_ITEMS)?;
    answer(seam.apply(DeleteRelations::new(a, id)).await?)
}

pub async fn read_graph<S: Seam>(seam: &S, _: ReadGraphArgs, _: Option<String>) -> Answered<S::Error> {
    Answer::shaped(&seam.query(ReadGraph(Select::All)).await?)
}

pub async fn search_nodes<S: Seam>(seam: &S, a: SearchNodesArgs, _: Option<String>) -> Answered<S::Error> {
    Answer::shaped(&seam.query(ReadGraph(Select::Matching(a.query))).await?)
}

pub async fn open_nodes<S: Seam>(seam: &S, a: OpenNodesArgs, _: Option<String>) -> Answered<S::Error> {
    bounded("names", a.names.len(), MAX_ITEMS)?;
    Answer::shaped(&seam.query(ReadGraph(Select::Named(a.names))).await?)
}

pub async fn import<S: Seam>(seam: &S, a: ImportArgs, id: Option<String>) -> Answered<S::Error> {
    bounded("entities", a.graph.entities.len(), MAX_IMPORT_ITEMS)?;
    bounded("relations", a.graph.relations.len(), MAX_IMPORT_ITEMS)?;
    answer(seam.apply(ImportGraph::new(a, id)).await?)
}
