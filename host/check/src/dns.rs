//! The DNS a check asks, answered by the gate: the queries arriving on the
//! UDP socket the check's child bound on 127.0.0.1:53 in its own network
//! namespace ([`serve`]), each answered ([`respond`]) from the gate host's
//! resolver ([`HostResolver`]) as a recursive resolver would answer libc.
//!
//! A render learns through this only that a name resolves and to what, as
//! a pod does; the gate host's resolver sees the names the render asks for.
//! No packet of the render leaves the check's namespace: the gate reads the
//! query and writes the answer, and only A and AAAA questions cause a
//! lookup. Lookups are bounded ([`MAX_LOOKUPS`] at once per check, and as
//! many `getaddrinfo` calls in the whole process, [`HOST_LOOKUPS`]; each
//! answered within [`LOOKUP_TIMEOUT`]): past either, the answer is
//! SERVFAIL, at once.
//!
//! One check asks the host's resolver once per name ([`Answers`]): libc
//! asks A and AAAA of a name at once, and again on a retry, and each
//! `getaddrinfo` asks the host's resolver both. Asked twice as often as
//! bare `haproxy -c` asks it, a resolver that drops a query under the load
//! (then libc waits 5 s for it) would stack those waits past the check's
//! deadline, where bare's single waits pass.

use hickory_proto::op::{Edns, Header, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{DNSClass, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Names one check remembers the answers of; past them, each query asks.
const REMEMBERED: usize = 4096;
/// Lookups in flight at once for one check; a query past them gets
/// SERVFAIL at once rather than a queue the render could fill.
pub const MAX_LOOKUPS: usize = 64;
/// The longest one lookup may take (libc's own default timeout); a check
/// lives about a second, so a slower answer would come too late anyway.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// The EDNS payload size we advertise and answer within (the DNS flag day
/// 2020 value, which avoids IP fragmentation).
pub const EDNS_PAYLOAD: u16 = 1232;
/// What a query without EDNS may be answered in (RFC 1035).
const PLAIN_PAYLOAD: usize = 512;

/// A lookup's answer to come; boxed so a [`Lookup`] can be chosen at run
/// time (`Arc<dyn Lookup>`), the fake one in tests.
pub type LookupFuture = Pin<Box<dyn Future<Output = Result<Vec<IpAddr>, LookupError>> + Send>>;

/// How names are resolved for the check: the gate host's resolver.
pub trait Lookup: Send + Sync + 'static {
    /// The addresses `name` has (fully qualified, no trailing dot), or why
    /// there are none.
    fn lookup(&self, name: &str) -> LookupFuture;
}

/// Why a lookup gave no addresses; a name that exists without addresses is
/// `Ok(vec![])` instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupError {
    /// The name does not exist: NXDOMAIN.
    NoSuchName,
    /// Anything else (no resolver reachable, a timeout): SERVFAIL, which
    /// libc treats as a temporary failure, never as a verdict on the name.
    Failed,
}

/// The host's resolver: `getaddrinfo`. A name with a dot is made absolute
/// (a trailing dot), so the host's search list is not applied a second
/// time: the check's libc already applied the pods' search list (the
/// world's `resolv.conf` carries the host's), and a name tried in the
/// host's domains could resolve where it would not on a pod. A single
/// label is looked up as it is: the host's own short names (its
/// `/etc/hosts`; glibc matches none of them to a name with the dot) are
/// what the gate host's resolver knows.
pub struct HostResolver;

impl Lookup for HostResolver {
    fn lookup(&self, name: &str) -> LookupFuture {
        let name = if name.contains('.') { format!("{name}.") } else { name.to_owned() };
        Box::pin(host_lookup(name))
    }
}

/// `getaddrinfo` calls in flight for every check of this process at once.
/// A call runs on a blocking thread and cannot be stopped: a lookup that
/// times out keeps its thread (and its permit) until `getaddrinfo` returns,
/// so names that never answer cannot fill the runtime's blocking threads,
/// which the checks' own work needs.
static HOST_LOOKUPS: Semaphore = Semaphore::const_new(MAX_LOOKUPS);

/// `getaddrinfo(name)`, read as a resolver's answer; Failed at once when
/// [`HOST_LOOKUPS`] are all taken.
async fn host_lookup(name: String) -> Result<Vec<IpAddr>, LookupError> {
    use std::net::ToSocketAddrs;
    let Ok(permit) = HOST_LOOKUPS.try_acquire() else {
        return Err(LookupError::Failed);
    };
    // the permit goes with the call, back when it returns, or when the call
    // is dropped unrun (the runtime shutting down)
    let looked_up = tokio::task::spawn_blocking(move || {
        let found = (name.as_str(), 0).to_socket_addrs().map(Iterator::collect::<Vec<_>>);
        drop(permit);
        found
    });
    match looked_up.await.map_err(|_| LookupError::Failed)? {
        Ok(found) => {
            let mut seen = std::collections::HashSet::new();
            Ok(found.into_iter().map(|a| a.ip()).filter(|ip| seen.insert(*ip)).collect())
        }
        Err(e) if gai_says(&e, libc::EAI_NONAME) => Err(LookupError::NoSuchName),
        Err(e) if gai_says(&e, libc::EAI_NODATA) => Ok(Vec::new()),
        Err(e) => {
            tracing::debug!(error = %e, "DNS for a check: lookup failed");
            Err(LookupError::Failed)
        }
    }
}

/// Whether `e` is getaddrinfo's `code`: std keeps only its message, the
/// text `gai_strerror` gives (untranslated: Rust never calls `setlocale`).
fn gai_says(e: &io::Error, code: libc::c_int) -> bool {
    // SAFETY: gai_strerror returns a pointer to a static, NUL-terminated string.
    let text = unsafe { std::ffi::CStr::from_ptr(libc::gai_strerror(code)) };
    text.to_str().is_ok_and(|t| e.to_string().ends_with(t))
}

/// Serves DNS queries arriving on `socket` (a UDP socket in the check's
/// network namespace) until the future is dropped (its task aborted), which
/// also drops every answer still in the making. Each query is answered
/// concurrently, so a slow name never delays another.
pub async fn serve(socket: UdpSocket, lookup: Arc<dyn Lookup>) {
    let asking = Arc::new(Asking {
        socket,
        lookup,
        permits: Semaphore::new(MAX_LOOKUPS),
        answers: Default::default(),
    });
    let mut answering = JoinSet::new();
    let mut buf = vec![0u8; 4096];
    loop {
        tokio::select! {
            received = asking.socket.recv_from(&mut buf) => match received {
                Ok((len, peer)) => {
                    answering.spawn(respond(peer, buf[..len].to_vec(), asking.clone()));
                }
                // What an earlier send's ICMP error can leave: not the socket's end.
                Err(e) if matches!(e.kind(), io::ErrorKind::ConnectionRefused
                    | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "DNS for a check: the socket failed; no more answers");
                    return;
                }
            },
            Some(_) = answering.join_next(), if !answering.is_empty() => {}
        }
    }
}

/// A lookup's answer, shared by every query of one name in one check.
type Answer = Arc<tokio::sync::OnceCell<Result<Vec<IpAddr>, LookupError>>>;

/// What one check's queries are answered with: its socket, the resolver
/// within the bounds, and the answers of its names, by name: looked up
/// once, the first query's lookup answering every other (up to
/// [`REMEMBERED`] names).
struct Asking {
    socket: UdpSocket,
    lookup: Arc<dyn Lookup>,
    permits: Semaphore,
    answers: std::sync::Mutex<std::collections::HashMap<String, Answer>>,
}

impl Asking {
    /// `name`'s addresses: this check's answer if it has one, else one
    /// lookup within the bounds (a query past them fails, unremembered).
    async fn addresses(&self, name: &str) -> Result<Vec<IpAddr>, LookupError> {
        let answer = self.answer(name);
        if let Some(known) = answer.get() {
            return known.clone();
        }
        let Ok(_permit) = self.permits.try_acquire() else { return Err(LookupError::Failed) };
        let looked_up = answer.get_or_init(|| async {
            tokio::time::timeout(LOOKUP_TIMEOUT, self.lookup.lookup(name))
                .await
                .unwrap_or(Err(LookupError::Failed))
        });
        looked_up.await.clone()
    }

    /// The answer to share for `name`; a fresh one past [`REMEMBERED`].
    fn answer(&self, name: &str) -> Answer {
        let mut names = self.answers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(answer) = names.get(name) {
            return answer.clone();
        }
        let answer = Answer::default();
        if names.len() < REMEMBERED {
            names.insert(name.to_owned(), answer.clone());
        }
        answer
    }
}

/// Answers one query from `peer`.
async fn respond(peer: SocketAddr, query: Vec<u8>, asking: Arc<Asking>) {
    let response = match request(&query) {
        Err(response) => response,
        Ok((query, Found::Known(addrs))) => reply(&query, Ok(addrs)),
        Ok((query, Found::LookUp(name))) => reply(&query, asking.addresses(&name).await),
    };
    if let Some(response) = response
        && let Err(e) = asking.socket.send_to(&response, peer).await
    {
        tracing::debug!(error = %e, "DNS for a check: answer not sent");
    }
}

/// Where a question's addresses come from.
enum Found {
    /// Known without a lookup: none for a type other than A or AAAA, the
    /// loopback ones for localhost (the check's /etc/hosts has them, so
    /// libc asks only for another type, or when told to skip the file).
    Known(Vec<IpAddr>),
    /// From a lookup of this name.
    LookUp(String),
}

/// The query read, with where its answer comes from; or, for a query we
/// cannot serve, what to answer at once (FORMERR) or `None`: unreadable, or
/// a response, never answered so that no two answerers can bounce errors.
fn request(bytes: &[u8]) -> Result<(Message, Found), Option<Vec<u8>>> {
    let header = Header::read(&mut BinDecoder::new(bytes)).map_err(|_| None)?;
    if header.message_type() == MessageType::Response {
        return Err(None);
    }
    let formerr = || {
        let mut response = Message::new();
        response.set_header(response_header(&header));
        response.set_response_code(ResponseCode::FormErr);
        response.to_vec().ok()
    };
    let query = Message::from_vec(bytes).map_err(|_| formerr())?;
    let [question] = query.queries() else {
        return Err(formerr());
    };
    if query.op_code() != OpCode::Query || question.query_class() != DNSClass::IN {
        return Err(formerr());
    }
    let name = question.name().to_ascii();
    let name = name.strip_suffix('.').unwrap_or(&name);
    let localhost =
        name.eq_ignore_ascii_case("localhost") || name.to_ascii_lowercase().ends_with(".localhost");
    let found = match question.query_type() {
        RecordType::A | RecordType::AAAA if localhost => {
            Found::Known(vec![Ipv4Addr::LOCALHOST.into(), Ipv6Addr::LOCALHOST.into()])
        }
        RecordType::A | RecordType::AAAA if !name.is_empty() => Found::LookUp(name.to_owned()),
        _ => Found::Known(Vec::new()),
    };
    Ok((query, found))
}

/// A response's header: the query's id, opcode, RD and CD; QR and RA set.
fn response_header(query: &Header) -> Header {
    let mut header = Header::response_from_request(query);
    header.set_recursion_available(true);
    header
}

/// The response to `query` (read by [`request`]) given what was found:
/// the addresses of the asked type with TTL 0 (a check lives a second),
/// as many as fit the size the query allows. TC is never set: libc would
/// ask again over TCP, which the check's resolver does not serve, and fail
/// the name that a pod resolves; HAProxy takes the first address anyway.
fn reply(query: &Message, found: Result<Vec<IpAddr>, LookupError>) -> Option<Vec<u8>> {
    let question = &query.queries()[0];
    let mut response = Message::new();
    response.set_header(response_header(query.header()));
    response.add_query(question.clone());
    let code = match found {
        Ok(addrs) => {
            for addr in addrs {
                let rdata = match (question.query_type(), addr) {
                    (RecordType::A, IpAddr::V4(v4)) => RData::A(A(v4)),
                    (RecordType::AAAA, IpAddr::V6(v6)) => RData::AAAA(AAAA(v6)),
                    _ => continue,
                };
                response.add_answer(Record::from_rdata(question.name().clone(), 0, rdata));
            }
            ResponseCode::NoError
        }
        Err(LookupError::NoSuchName) => ResponseCode::NXDomain,
        Err(LookupError::Failed) => ResponseCode::ServFail,
    };
    response.set_response_code(code);
    let limit = match query.extensions() {
        Some(edns) => {
            let mut ours = Edns::new();
            ours.set_max_payload(EDNS_PAYLOAD);
            response.set_edns(ours);
            usize::from(edns.max_payload().min(EDNS_PAYLOAD)).max(PLAIN_PAYLOAD)
        }
        None => PLAIN_PAYLOAD,
    };
    let mut bytes = response.to_vec().ok()?;
    while bytes.len() > limit && response.answers_mut().pop().is_some() {
        bytes = response.to_vec().ok()?;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use RecordType::{A as TA, AAAA as TAAAA};
    use hickory_proto::op::Query;
    use hickory_proto::rr::Name;
    use std::cell::Cell;

    /// One answer, pure: the response bytes for `query`, with `lookup` asked
    /// only when the question needs it (an A or AAAA of a name other than
    /// localhost). `None`: nothing to answer (not a DNS query, or a response).
    fn answer(
        query: &[u8],
        lookup: impl FnOnce(&str) -> Result<Vec<IpAddr>, LookupError>,
    ) -> Option<Vec<u8>> {
        match request(query) {
            Err(response) => response,
            Ok((query, Found::Known(addrs))) => reply(&query, Ok(addrs)),
            Ok((query, Found::LookUp(name))) => reply(&query, lookup(&name)),
        }
    }

    fn query(id: u16, name: &str, rtype: RecordType, edns: bool) -> Vec<u8> {
        let mut m = Message::new();
        m.set_id(id).set_recursion_desired(true);
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
        if edns {
            m.set_edns(Edns::new().set_max_payload(1400).clone());
        }
        m.to_vec().unwrap()
    }

    /// The answer to `query` when the lookup finds `found`, and how often it was asked.
    fn ask(query: &[u8], found: Result<Vec<IpAddr>, LookupError>) -> (Message, usize) {
        let calls = Cell::new(0);
        let bytes = answer(query, |_| {
            calls.set(calls.get() + 1);
            found
        });
        (Message::from_vec(&bytes.expect("an answer")).unwrap(), calls.get())
    }

    fn addrs(m: &Message) -> Vec<String> {
        m.answers().iter().map(|r| r.data().to_string()).collect()
    }

    fn mixed() -> Result<Vec<IpAddr>, LookupError> {
        Ok(vec![[10, 0, 0, 1].into(), Ipv6Addr::LOCALHOST.into(), [10, 0, 0, 2].into()])
    }

    #[test]
    fn a_and_aaaa_get_their_own_addresses_with_ttl_0() {
        let (m, calls) = ask(&query(7, "db.example.", TA, false), mixed());
        assert_eq!((calls, addrs(&m)), (1, vec!["10.0.0.1".into(), "10.0.0.2".into()]));
        assert!(m.answers().iter().all(|r| r.ttl() == 0 && r.name().to_ascii() == "db.example."));
        assert_eq!(addrs(&ask(&query(7, "db.example.", TAAAA, false), mixed()).0), ["::1"]);
    }

    #[test]
    fn the_id_question_and_flags_are_echoed() {
        let (m, _) = ask(&query(0xbeef, "Db.Example.", TA, false), mixed());
        let flags = (m.message_type(), m.recursion_desired(), m.recursion_available());
        assert_eq!((m.id(), flags), (0xbeef, (MessageType::Response, true, true)));
        assert_eq!(m.queries()[0].name().to_ascii(), "Db.Example.");
    }

    #[test]
    fn nodata_nxdomain_and_servfail() {
        let q = query(1, "v6only.example.", TA, false);
        let (m, _) = ask(&q, Ok(vec![Ipv6Addr::LOCALHOST.into()]));
        assert_eq!((m.response_code(), m.answers().len()), (ResponseCode::NoError, 0));
        assert_eq!(ask(&q, Err(LookupError::NoSuchName)).0.response_code(), ResponseCode::NXDomain);
        assert_eq!(ask(&q, Err(LookupError::Failed)).0.response_code(), ResponseCode::ServFail);
    }

    #[test]
    fn other_types_and_localhost_are_answered_without_a_lookup() {
        for rtype in [RecordType::MX, RecordType::PTR, RecordType::SRV, RecordType::ANY] {
            let (m, calls) = ask(&query(1, "db.example.", rtype, false), mixed());
            let got = (m.response_code(), m.answers().len(), calls);
            assert_eq!(got, (ResponseCode::NoError, 0, 0), "{rtype}");
        }
        let (m, calls) = ask(&query(1, "a.LocalHost.", TA, false), mixed());
        assert_eq!((addrs(&m), calls), (vec!["127.0.0.1".to_owned()], 0));
    }

    #[test]
    fn two_questions_get_formerr_and_garbage_nothing() {
        let mut m = Message::from_vec(&query(9, "a.example.", TA, false)).unwrap();
        m.add_query(Query::query(Name::from_ascii("b.example.").unwrap(), TA));
        let (r, calls) = ask(&m.to_vec().unwrap(), mixed());
        assert_eq!((r.id(), r.response_code(), calls), (9, ResponseCode::FormErr, 0));
        assert_eq!(answer(b"\x12\x34junk", |_| mixed()), None);
        m.set_message_type(MessageType::Response);
        assert_eq!(answer(&m.to_vec().unwrap(), |_| mixed()), None, "a response is not answered");
    }

    #[test]
    fn forty_addresses_are_cut_to_fit_without_edns_and_all_fit_with_it() {
        let many: Vec<IpAddr> = (0..40).map(|i| Ipv4Addr::new(10, 0, 0, i).into()).collect();
        let bytes = answer(&query(1, "many.example.", TA, false), |_| Ok(many.clone())).unwrap();
        let m = Message::from_vec(&bytes).unwrap();
        // what fits, never TC: there is no TCP to retry on
        assert!(bytes.len() <= 512 && !m.truncated(), "{}", bytes.len());
        assert!(m.answers().len() > 20 && m.answers().len() < 40, "{}", m.answers().len());
        assert!(m.extensions().is_none());
        let (m, _) = ask(&query(1, "many.example.", TA, true), Ok(many));
        assert_eq!((m.truncated(), m.answers().len()), (false, 40));
        assert_eq!(m.extensions().as_ref().map(Edns::max_payload), Some(EDNS_PAYLOAD));
    }

    /// Answers `slow.example` with 10.0.0.1 after 300 ms, anything else with 10.0.0.0 at once.
    struct Fake;
    impl Lookup for Fake {
        fn lookup(&self, name: &str) -> LookupFuture {
            let slow = name == "slow.example";
            Box::pin(async move {
                if slow {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                Ok(vec![Ipv4Addr::new(10, 0, 0, u8::from(slow)).into()])
            })
        }
    }

    #[tokio::test]
    async fn serve_answers_each_query_without_waiting_for_another() {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = server.local_addr().unwrap();
        let serving = tokio::spawn(serve(server, Arc::new(Fake)));
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let start = tokio::time::Instant::now();
        client.send_to(&query(1, "slow.example.", TA, false), to).await.unwrap();
        client.send_to(&query(2, "fast.example.", TA, false), to).await.unwrap();
        let (mut buf, mut got) = ([0; 512], Vec::new());
        for _ in 0..2 {
            let len = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buf)).await;
            let m = Message::from_vec(&buf[..len.unwrap().unwrap()]).unwrap();
            got.push((m.id(), addrs(&m), start.elapsed() < Duration::from_millis(250)));
        }
        serving.abort();
        let (fast, slow) = (vec!["10.0.0.0".to_owned()], vec!["10.0.0.1".to_owned()]);
        assert_eq!(got, [(2, fast, true), (1, slow, false)]);
    }

    /// Counts its lookups; every name is slow enough for queries to meet.
    struct Counting(std::sync::atomic::AtomicUsize);

    impl Lookup for Counting {
        fn lookup(&self, _: &str) -> LookupFuture {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Err(LookupError::NoSuchName)
            })
        }
    }

    #[tokio::test]
    async fn one_check_asks_the_host_once_per_name() {
        let server = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let to = server.local_addr().unwrap();
        let counting = Arc::new(Counting(Default::default()));
        let serving = tokio::spawn(serve(server, counting.clone()));
        let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut buf = [0; 512];
        // libc's A and AAAA at once, then its retry, then another name
        for round in 0..2u16 {
            for (i, rtype) in [TA, TAAAA].into_iter().enumerate() {
                let id = round * 2 + i as u16;
                client.send_to(&query(id, "gone.example.", rtype, false), to).await.unwrap();
            }
            for _ in 0..2 {
                let len = tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buf)).await;
                let m = Message::from_vec(&buf[..len.unwrap().unwrap()]).unwrap();
                assert_eq!(m.response_code(), ResponseCode::NXDomain);
            }
        }
        client.send_to(&query(9, "other.example.", RecordType::A, false), to).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), client.recv(&mut buf)).await.unwrap().unwrap();
        serving.abort();
        assert_eq!(counting.0.load(std::sync::atomic::Ordering::Relaxed), 2);
    }

    #[tokio::test]
    async fn the_host_resolver_resolves_and_knows_a_missing_name() {
        let hosts = std::fs::read_to_string("/etc/hosts").unwrap();
        let mut entries = hosts.lines().map(|l| l.split('#').next().unwrap().split_whitespace());
        let entry = entries.find_map(|mut words| {
            let ip: IpAddr = words.next()?.parse().ok()?;
            words
                .find(|n| !n.ends_with("localhost") && !n.contains('.'))
                .map(|n| (ip, n.to_owned()))
        });
        // a single label, as the host's resolver knows it (this machine's
        // /etc/hosts names itself)
        let (ip, name) = entry.expect("/etc/hosts names a host by a single label");
        let found = HostResolver.lookup(&name).await;
        assert!(found.as_ref().is_ok_and(|addrs| addrs.contains(&ip)), "{name}: {found:?}");
        assert_eq!(HostResolver.lookup("nonexistent.invalid").await, Err(LookupError::NoSuchName));
    }
}
