//! Kubernetes' sample-controller written the kube-rs way, as a peer in
//! bench/bench_controller.sh: the same Foo -> nginx Deployment reconciliation as
//! k8s.io/sample-controller's syncHandler, on a kube-rs `Controller`.
//!
//! Flags (`--x` and `-x`, each as `--x V` or `--x=V`):
//!   --kubeconfig PATH     else $KUBECONFIG, ~/.kube/config or in-cluster
//!   --namespace NS        the only namespace watched (default: all)
//!   --kube-api-qps N      client-side QPS (0, the default: no limit, as kube-rs)
//!   --kube-api-burst N    client-side burst (0: 10 when a QPS is given)
//!   -v N                  4 or more: a debug line for each sync
//!
//! kube-rs has no client-side rate limiter (client-go has one: a token bucket of
//! QPS and burst that every request waits on). So that the benchmark can give all
//! controllers the same limits, the QPS/burst flags install a token bucket of the
//! same model as a tower layer under the client (RateLimitLayer below).
//!
//! How it maps onto sample-controller:
//!   - "Started workers" is logged when the Foo store has its first list, which is
//!     when the controller starts reconciling (see main);
//!   - Foos are watched into the controller's store (the Go original's lister);
//!     Deployments are watched by `owns`, which kube-rs does with a metadata-only
//!     watch that triggers the owning Foo and keeps no store, so the reconciler
//!     reads the Deployment with a GET where the Go original reads its lister;
//!   - 2 concurrent reconciles (its 2 workers);
//!   - kube-rs watchers have no resync; a successful reconcile requeues the Foo
//!     after 30 s, which replays each Foo every 30 s like the informer resync;
//!   - a failed reconcile is retried after 5 ms doubling to 1,000 s per Foo, the
//!     delays of client-go's default per-item workqueue backoff;
//!   - the status is written with a merge patch (the Go original sends the whole
//!     Foo with its resourceVersion, and a stale one is a 409 and a retry);
//!   - Events go through kube-rs's Recorder (events.k8s.io/v1, repeats patched
//!     as a series) where the Go original writes core/v1 Events.
// `foo` is no placeholder here: Foo is the kind this controller reconciles.
#![allow(clippy::disallowed_names)]

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    process::ExitCode,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec},
        core::v1::{Container, PodSpec, PodTemplateSpec},
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference},
};
use kube::{
    Api, Client, CustomResource, Resource, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    client::ClientBuilder,
    config::{Config, KubeConfigOptions, Kubeconfig},
    runtime::{
        WatchStreamExt,
        controller::{self, Action, Controller},
        events::{Event, EventType, Recorder, Reporter},
        reflector::{self, reflector},
        watcher::{self, watcher},
    },
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};
use tracing::{Level, debug, error, info, warn};
use tracing_subscriber::{filter::Targets, fmt, prelude::*};

/// The Events' reporting controller and the field manager of our writes, the
/// names the Go original uses.
const AGENT: &str = "sample-controller";
const WORKERS: u16 = 2;
const RESYNC: Duration = Duration::from_secs(30);
const BACKOFF_BASE: Duration = Duration::from_millis(5);
const BACKOFF_MAX: Duration = Duration::from_secs(1000);

/// The Foo API (samplecontroller.k8s.io/v1alpha1). The CRD installed is
/// deploy/crd.yaml; these are the fields the Go original's types have.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "samplecontroller.k8s.io",
    version = "v1alpha1",
    kind = "Foo",
    plural = "foos",
    namespaced,
    status = "FooStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    #[serde(default)]
    pub deployment_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    #[serde(default)]
    pub available_replicas: i32,
}

#[derive(Debug)]
enum Error {
    Kube(kube::Error),
    NotControlled(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Kube(e) => write!(f, "{e}"),
            Error::NotControlled(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for Error {}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        Error::Kube(e)
    }
}

struct Ctx {
    client: Client,
    recorder: Recorder,
    /// Consecutive failures per Foo (namespace, name), for the retry backoff.
    failures: Mutex<HashMap<(String, String), u32>>,
}

impl Ctx {
    fn forget(&self, ns: &str, name: &str) {
        let mut f = self.failures.lock().unwrap();
        if !f.is_empty() {
            f.remove(&(ns.to_string(), name.to_string()));
        }
    }

    /// Events are best effort, as with client-go's recorder: a failure is logged.
    async fn event(&self, foo: &Foo, type_: EventType, reason: &str, note: &str) {
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(note.into()),
            action: "Reconcile".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&ev, &foo.object_ref(&())).await {
            warn!(foo = %foo.name_any(), reason, error = %e, "could not record an event");
        }
    }
}

/// The Deployment a Foo asks for: nginx, labelled for the Foo, controlled by it.
fn new_deployment(foo: &Foo) -> Deployment {
    let labels = std::collections::BTreeMap::from([
        ("app".to_string(), "nginx".to_string()),
        ("controller".to_string(), foo.name_any()),
    ]);
    let owner = OwnerReference {
        block_owner_deletion: Some(true),
        ..foo
            .controller_owner_ref(&())
            .expect("a Foo from the API has a name and uid")
    };
    Deployment {
        metadata: ObjectMeta {
            name: Some(foo.spec.deployment_name.clone()),
            namespace: foo.namespace(),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: foo.spec.replicas,
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".into(),
                        image: Some("nginx:latest".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

/// metav1.IsControlledBy: the controller owner reference carries the Foo's uid.
fn controlled_by(dep: &Deployment, foo: &Foo) -> bool {
    let uid = foo.uid();
    dep.owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .is_some_and(|r| Some(&r.uid) == uid.as_ref())
}

/// sample-controller's syncHandler, step by step. A Foo that is gone is never
/// handed to us: the controller skips keys missing from its store.
async fn reconcile(foo: Arc<Foo>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = foo.namespace().unwrap_or_default();
    let foo_name = foo.name_any();
    let name = foo.spec.deployment_name.as_str();
    if name.is_empty() {
        // Not retried: only a change to the Foo can mend it, and that triggers it.
        error!(foo = %format!("{ns}/{foo_name}"), "Deployment name missing from object reference");
        ctx.forget(&ns, &foo_name);
        return Ok(Action::await_change());
    }

    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let pp = PostParams {
        field_manager: Some(AGENT.into()),
        ..Default::default()
    };
    let mut dep = match deployments.get_opt(name).await? {
        Some(d) => d,
        None => deployments.create(&pp, &new_deployment(&foo)).await?,
    };

    if !controlled_by(&dep, &foo) {
        let msg = format!("Resource \"{name}\" already exists and is not managed by Foo");
        ctx.event(&foo, EventType::Warning, "ErrResourceExists", &msg)
            .await;
        return Err(Error::NotControlled(msg));
    }

    if let Some(want) = foo.spec.replicas {
        let have = dep.spec.replicas;
        if have != Some(want) {
            debug!(deployment = name, ?have, want, "Update deployment resource");
            // As the Go original: the whole Deployment is written afresh, without a
            // resourceVersion (an unconditional update).
            dep = deployments
                .replace(name, &pp, &new_deployment(&foo))
                .await?;
        }
    }

    let status = FooStatus {
        available_replicas: dep
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0),
    };
    // A merge patch of the status, as kube-rs users write it: it carries no
    // resourceVersion, so a Foo in the store older than the server's (its own last
    // status write not yet seen) does not make it a 409 and a retry.
    let foos: Api<Foo> = Api::namespaced(ctx.client.clone(), &ns);
    let patch = serde_json::json!({ "status": status });
    let params = PatchParams {
        field_manager: Some(AGENT.into()),
        ..Default::default()
    };
    foos.patch_status(&foo_name, &params, &Patch::Merge(&patch))
        .await?;

    ctx.event(&foo, EventType::Normal, "Synced", "Foo synced successfully")
        .await;
    ctx.forget(&ns, &foo_name);
    Ok(Action::requeue(RESYNC))
}

/// Retry after 5 ms, 10 ms, 20 ms, ... up to 1,000 s, per Foo.
fn error_policy(foo: Arc<Foo>, _err: &Error, ctx: Arc<Ctx>) -> Action {
    let key = (foo.namespace().unwrap_or_default(), foo.name_any());
    let n = {
        let mut f = ctx.failures.lock().unwrap();
        let n = f.entry(key).or_insert(0);
        *n += 1;
        *n - 1
    };
    let delay = BACKOFF_BASE
        .checked_mul(1u32 << n.min(30))
        .map_or(BACKOFF_MAX, |d| d.min(BACKOFF_MAX));
    Action::requeue(delay)
}

/// A token bucket in front of every request, the model of client-go's client-side
/// limiter: `burst` requests at once, then `qps` a second. The client's Buffer
/// polls it before each request in turn, so requests wait in order.
#[derive(Clone)]
struct RateLimitLayer {
    qps: f64,
    burst: f64,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            qps: self.qps,
            burst: self.burst,
            tokens: self.burst,
            last: Instant::now(),
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
            reserved: false,
        }
    }
}

struct RateLimited<S> {
    inner: S,
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
    sleep: Pin<Box<Sleep>>,
    /// A token is taken for the next call.
    reserved: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.reserved {
            let now = Instant::now();
            let refill = now.duration_since(self.last).as_secs_f64() * self.qps;
            self.tokens = (self.tokens + refill).min(self.burst);
            self.last = now;
            if self.tokens >= 1.0 {
                self.tokens -= 1.0;
                self.reserved = true;
                break;
            }
            let wait = Duration::from_secs_f64((1.0 - self.tokens) / self.qps);
            self.sleep.as_mut().reset(now + wait);
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        self.reserved = false;
        self.inner.call(req)
    }
}

#[derive(Default)]
struct Args {
    kubeconfig: Option<String>,
    namespace: Option<String>,
    qps: f64,
    burst: u32,
    verbosity: u32,
}

const USAGE: &str = "usage: sample-controller-rs [--kubeconfig PATH] [--namespace NS] \
[--kube-api-qps N] [--kube-api-burst N] [-v N]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        if arg == "-h" || arg == "--help" || arg == "-help" {
            return Err(String::new());
        }
        let flag = arg
            .strip_prefix("--")
            .or_else(|| arg.strip_prefix('-'))
            .ok_or_else(|| format!("unexpected argument {arg:?}"))?;
        let (key, value) = match flag.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (
                flag.to_string(),
                it.next()
                    .ok_or_else(|| format!("flag needs an argument: {arg}"))?,
            ),
        };
        let bad = || format!("invalid value {value:?} for flag -{key}");
        match key.as_str() {
            "kubeconfig" => args.kubeconfig = Some(value.clone()).filter(|v| !v.is_empty()),
            "namespace" => args.namespace = Some(value.clone()).filter(|v| !v.is_empty()),
            "kube-api-qps" => args.qps = value.parse().map_err(|_| bad())?,
            "kube-api-burst" => args.burst = value.parse().map_err(|_| bad())?,
            "v" => args.verbosity = value.parse().map_err(|_| bad())?,
            _ => return Err(format!("flag provided but not defined: {arg}")),
        }
    }
    if !(args.qps >= 0.0 && args.qps.is_finite()) {
        return Err(format!("invalid value {} for flag -kube-api-qps", args.qps));
    }
    Ok(args)
}

async fn make_client(args: &Args) -> Result<Client, Box<dyn std::error::Error>> {
    let config = match &args.kubeconfig {
        Some(path) => {
            Config::from_custom_kubeconfig(
                Kubeconfig::read_from(path)?,
                &KubeConfigOptions::default(),
            )
            .await?
        }
        None => Config::infer().await?,
    };
    if args.qps == 0.0 && args.burst == 0 {
        return Ok(Client::try_from(config)?);
    }
    let qps = if args.qps > 0.0 { args.qps } else { 5.0 };
    let burst = if args.burst > 0 { args.burst } else { 10 };
    let layer = RateLimitLayer {
        qps,
        burst: f64::from(burst),
    };
    Ok(ClientBuilder::try_from(config)?.with_layer(&layer).build())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("{msg}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Info and up from everything; with -v 4 or more, this program's debug lines
    // too (one per sync), not those of the libraries under it.
    let filter = Targets::new().with_default(Level::INFO).with_target(
        env!("CARGO_CRATE_NAME"),
        if args.verbosity >= 4 {
            Level::DEBUG
        } else {
            Level::INFO
        },
    );
    tracing_subscriber::registry()
        .with(
            fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter),
        )
        .init();

    let client = match make_client(&args).await {
        Ok(c) => c,
        Err(e) => {
            error!(error = %e, "Error building the client");
            return ExitCode::FAILURE;
        }
    };
    let (foos, deployments): (Api<Foo>, Api<Deployment>) = match &args.namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: AGENT.into(),
            instance: None,
        },
    );
    let ctx = Arc::new(Ctx {
        client,
        recorder,
        failures: Mutex::new(HashMap::new()),
    });

    // The benchmark waits for "Started workers". The controller holds its
    // reconcilers until its Foo store has the first list (InitDone), so that is
    // when the line is logged. It cannot wait on the store (Store::wait_until_ready)
    // beside the controller: the store's readiness wakes one waiter only (kube-rs
    // 5.0's DelayedInit keeps a single waker), and whichever of the two polled
    // first would sleep forever. So the Foo watch is built here, as
    // Controller::new builds it, with a look at its events on the way to the
    // store, and handed over with Controller::for_stream (the one line that needs
    // kube-runtime's unstable-runtime-stream-control feature).
    let (store, writer) = reflector::store::<Foo>();
    let mut announced = false;
    let foo_events = watcher(foos, watcher::Config::default()).inspect_ok(move |ev| {
        if !announced && matches!(ev, watcher::Event::InitDone) {
            announced = true;
            info!(count = WORKERS, "Started workers");
        }
    });
    let ctl = Controller::for_stream(reflector(writer, foo_events).applied_objects(), store)
        .owns(deployments, watcher::Config::default())
        .with_config(controller::Config::default().concurrency(WORKERS))
        .shutdown_on_signal();

    let ctx_done = ctx.clone();
    ctl.run(reconcile, error_policy, ctx)
        .for_each(move |res| {
            match res {
                Ok((obj, _)) => debug!(foo = %obj, "Successfully synced"),
                Err(controller::Error::ObjectNotFound(obj)) => {
                    // Deleted since it was queued: nothing to do.
                    debug!(foo = %obj, "Foo no longer exists");
                    ctx_done.forget(obj.namespace.as_deref().unwrap_or(""), &obj.name);
                }
                Err(controller::Error::ReconcilerFailed(e, obj)) => {
                    error!(foo = %obj, error = %e, "Error syncing; requeuing for later retry");
                }
                Err(e) => warn!(error = %e, "controller stream error"),
            }
            futures::future::ready(())
        })
        .await;
    info!("Shutting down workers");
    ExitCode::SUCCESS
}
