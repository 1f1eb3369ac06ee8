//! The seam as compatibility adapters see it in this process: a native call runs as its
//! declaration says (the same runner a native tool call takes, with no second authorization:
//! the adapter's own call was authorized), and a profile's rule or query goes to the engine.

use serde::Serialize;
use serde::de::DeserializeOwned;
use state_compat::seam::{Answer, Answered, Failure, Native, Outcome as Said, Seam};
use state_core::InvalidInput;
use state_core::plan::{Query, Rule};
use state_store::EngineError;

use super::{CallError, Local, encode};
use crate::catalog::{Operation, Profile, Runner};
use crate::reply::{Outcome, Reply};

pub(crate) struct LocalSeam<'a>(pub(crate) &'a Local);

/// The native operation named `name`, from a table built once: adapters call on every call.
fn native_named(name: &str) -> Option<Operation> {
    static NATIVE: std::sync::LazyLock<std::collections::HashMap<&'static str, Operation>> =
        std::sync::LazyLock::new(|| {
            Operation::all().filter(|o| o.spec().profile == Profile::Native).map(|o| (o.name(), o)).collect()
        });
    NATIVE.get(name).copied()
}

impl Seam for LocalSeam<'_> {
    type Error = CallError;

    async fn call<Req, Res>(&self, op: Native<Req, Res>, request: Req) -> Result<Res, CallError>
    where
        Req: Serialize + Send,
        Res: DeserializeOwned,
    {
        let native = native_named(op.name)
            .ok_or_else(|| CallError::Encode(format!("no native operation is named `{}`", op.name)))?;
        let Runner::Engine(run) = native.spec().runner() else {
            return Err(CallError::Encode(format!("`{}` is not a native operation", op.name)));
        };
        let reply = run(self.0, encode(&request)?).await?;
        match reply.body {
            Ok(body) => serde_json::from_value(body)
                .map_err(|e| CallError::Encode(format!("the answer of `{}` did not read back: {e}", op.name))),
            Err(error) => Err(CallError::Refused(error)),
        }
    }

    async fn apply<R: Rule>(&self, rule: R) -> Result<R::Output, CallError> {
        Ok(self.0.engine().apply(rule).await?)
    }

    async fn query<Q: Query>(&self, query: Q) -> Result<Q::Output, CallError> {
        Ok(self.0.engine().query(query).await?)
    }

    fn invalid(error: &CallError) -> Option<&InvalidInput> {
        match error {
            CallError::Engine(EngineError::Invalid(invalid)) => Some(invalid),
            _ => None,
        }
    }
}

/// A profile's answer as the seam replies it.
pub(crate) fn reply(answered: Answered<CallError>) -> Result<Reply, CallError> {
    match answered {
        Ok(Answer { outcome, body }) => {
            let outcome = match outcome {
                Said::Ok => Outcome::Ok,
                Said::Conflict => Outcome::Conflict,
                Said::NotFound => Outcome::NotFound,
                Said::Invalid => Outcome::Invalid,
            };
            Ok(Reply::result(outcome, body))
        }
        Err(Failure::NotFound(message)) => Err(CallError::NotFound(message)),
        Err(Failure::Invalid(invalid)) => Err(invalid.into()),
        Err(Failure::Arguments(message)) => Err(CallError::Arguments(message)),
        Err(Failure::Encode(message)) => Err(CallError::Encode(message)),
        Err(Failure::Seam(error)) => Err(error),
    }
}
