// Package metrics is the one list of caddy-posts' Prometheus metrics, all named caddy_posts_*,
// and the calls that record them. The collectors belong to the process, so counters keep
// counting across config reloads; each config registers them in its Caddy registry (Register),
// which Caddy serves at the admin endpoint's /metrics and through its metrics handler, beside
// caddy_http_*. Every label takes values from a short fixed list (an interface, a route, an
// operation type, a code, a subdirective's name) or from the config (a JWKS URL): never a user
// id, a post id or an operation name, so the series stay few whatever clients send.
//
// It imports no package of ours, so that every package may record.
package metrics

import (
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "caddy_posts"

// latencyBuckets cover what the API takes: tens of microseconds on the embedded store, up to
// the 5 s default timeout of a store that does not answer.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// The collectors. Their names, types, labels and help are the table of metrics of
// docs/operations.md (docs_test.go writes it), so each help says what an operator needs to read
// the series: what it counts and the values each label takes.
var (
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "requests_total",
		Help: "Requests answered, by interface (rest, graphql, ws, sse, multipart), operation and code. The operation is a REST method and route (GET /posts/{id}; other /posts for a method the route does not take; other for a path under /posts/ that names no post), a GraphQL operation type (query, mutation, subscription; none when refused before one was chosen; graphiql for the page), preflight for a browser's CORS preflight of either, or over ws an operation's type or connection. The code is REST's HTTP status, GraphQL's first extensions.code or OK, or a WebSocket connection's close code.",
	}, []string{"interface", "operation", "code"})
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "request_duration_seconds",
		Help:    "Time to answer a request, by the labels of caddy_posts_requests_total: a WebSocket's operations from their subscribe message (a subscription to its start), its connections not at all; a subscription streamed over HTTP (sse, multipart) to the start of its stream.",
		Buckets: latencyBuckets,
	}, []string{"interface", "operation", "code"})

	storeDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "store_operation_duration_seconds",
		Help:    "Time of a store operation, by backend (sqlite, mongodb) and operation: get_post, list_posts, insert_post, update_post, delete_post, save_user, get_user, get_users, ping; of idempotency keys, reserve_key, take_over_key, complete_key, insert_post_completing_key, release_key, delete_key, delete_expired_keys.",
		Buckets: latencyBuckets,
	}, []string{"backend", "operation"})
	storeErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "store_errors_total",
		Help: "Store operations that failed, by backend, operation and error (unavailable: no answer in time or no connection; internal: anything else). Not found is an answer, not an error.",
	}, []string{"backend", "operation", "error"})

	authOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "auth_total",
		Help: "Credentials checked (every request, a WebSocket's upgrade and its connection_init), by method (jwt, api_key, caddy, none, or unknown for credentials of no one method) and outcome: ok, anonymous, or why they were refused (malformed, different_users, unknown_key, not_accepted, unknown_kid, bad_signature, expired, not_yet_valid, wrong_issuer, wrong_audience, bad_user_id, keys_unavailable).",
	}, []string{"method", "outcome"})
	jwksFetches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "jwks_fetches_total",
		Help: "Fetches of a JSON Web Key Set, by URL and result (ok, error).",
	}, []string{"url", "result"})
	jwksKeys = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "jwks_keys",
		Help: "Keys held from a JSON Web Key Set, by URL.",
	}, []string{"url"})

	wsConnections = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "websocket_connections",
		Help: "WebSocket connections open.",
	})
	streams = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "streams",
		Help: "Subscriptions streamed over HTTP, open, by interface (sse, multipart).",
	}, []string{"interface"})
	feeds = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "subscription_executions",
		Help: "Distinct subscription operations running; subscribers of the same document, operation name and variables share one.",
	})
	subscribers = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "subscribers",
		Help: "Subscriptions open, on WebSockets and HTTP streams.",
	})
	clientMemory = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "client_memory_bytes",
		Help: "Bytes the WebSockets and HTTP streams of all clients hold for them (events queued and being written, responses held back, replays' pages), each client's counted against max_memory_per_client.",
	})
	eventsPublished = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "events_published_total",
		Help: "Writes published to subscriptions.",
	})
	eventsDelivered = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "events_delivered_total",
		Help: "Subscription events queued to a subscriber (WebSocket or HTTP stream).",
	})
	eventsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "events_dropped_total",
		Help: "Events a consumer that fell behind did not take, by stage: feed (a subscription execution that resolved events too slowly, which starts again, its subscribers reading those events from the event log) or connection (a client that read too slowly, then closed with TOO_SLOW, 1013).",
	}, []string{"stage"})
	documentCache = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "document_cache_total",
		Help: "Lookups and changes of the cache of prepared GraphQL documents, by event: hit (a document found prepared, in the cache or the persisted query manifest, which skips the parse and the admission pass), miss, registration, eviction.",
	}, []string{"event"})
	postCache = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "post_cache_total",
		Help: "Lookups and evictions of the embedded store's cache of posts (post_cache_size), by event: hit (a read of a post by its id answered from memory), miss (read from the file, then kept), eviction.",
	}, []string{"event"})
	postCacheBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "post_cache_bytes",
		Help: "What the embedded stores' caches of posts hold, in bytes of the heap (an estimate), at most post_cache_size each.",
	})
	limitRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "limit_refusals_total",
		Help: "Requests, messages and connections refused or cut off for a limit, by the subdirective that sets it: max_body_size, max_query_length, max_depth, max_cost, max_aliases, max_root_fields, max_fields, max_response_size, max_subscriptions, max_connections, max_connections_per_user, max_memory_per_client, max_distinct_subscriptions, max_distinct_subscriptions_per_client, max_resume_events, ws_read_limit, ws_init_timeout.",
	}, []string{"limit"})

	relayEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "relay_events_total",
		Help: "Events of the store's event log, by outcome: relayed (another instance's, handed to the local subscribers), recovered (of a write whose writer stopped before it logged its event, logged by this instance).",
	}, []string{"outcome"})
	relayLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "relay_lag_seconds",
		Help:    "Time from another instance's logging of an event to its hand-off to the local subscribers (clocks of two machines: their skew included).",
		Buckets: []float64{.005, .01, .025, .05, .1, .15, .2, .3, .5, 1, 2.5, 5, 10, 30},
	})
	relayErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "relay_errors_total",
		Help: "Failures of the follower of the store's event log, by stage: tail (a read of the log), expire (the periodic delete of expired events), recover (the periodic logging of the events of writes whose writer stopped).",
	}, []string{"stage"})
)

// The event log and resuming from it.
var (
	eventLogEvents = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "event_log_events",
		Help: "Events the store's event log holds (on MongoDB, with the markers of holes, an estimate), as of the start or the last expiry (every minute).",
	})
	eventLogOldest = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "event_log_oldest_position",
		Help: "The position of the oldest event the log keeps (0: none): a cursor before it is expired.",
	})
	eventLogLast = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "event_log_last_position",
		Help: "The last position the log gave, as of the start or the last expiry.",
	})
	resumes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "resumes_total",
		Help: "Subscriptions started with resumeFrom, by outcome: ok (replayed, then live), expired (a cursor older than the log keeps: CURSOR_EXPIRED), refused (a cursor not of this log, or past max_resume_events).",
	}, []string{"outcome"})
	eventsReplayed = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "events_replayed_total",
		Help: "Responses that resumed subscriptions received from the log, before their live events.",
	})
)

// The store's circuit breaker (store.Breaker).
var (
	storeBreakerOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "store_breaker_open",
		Help: "Store breakers open, by backend: 1 while a store that failed repeatedly has every call fail at once, until its probe gets an answer (the health path reports it).",
	}, []string{"backend"})
	storeBreakerOpened = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "store_breaker_opened_total",
		Help: "Times a store breaker opened, by backend; counts the outages shorter than a scrape too.",
	}, []string{"backend"})
)

var all = []prometheus.Collector{
	requests, requestDuration, storeDuration, storeErrors, authOutcomes, jwksFetches, jwksKeys,
	wsConnections, streams, feeds, subscribers, clientMemory, eventsPublished, eventsDelivered, eventsDropped, documentCache, postCache, postCacheBytes, limitRefusals,
	storeBreakerOpen, storeBreakerOpened,
	relayEvents, relayLag, relayErrors,
	eventLogEvents, eventLogOldest, eventLogLast, resumes, eventsReplayed,
}

// Register adds the metrics to reg, a config's registry. Every site of a config registers them;
// the registry keeps the first.
func Register(reg prometheus.Registerer) error {
	for _, c := range all {
		if err := reg.Register(c); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return err
		}
	}
	return nil
}

// The interfaces of caddy_posts_requests_total.
const (
	REST      = "rest"
	GraphQL   = "graphql"
	WebSocket = "ws"
	SSE       = "sse"
	Multipart = "multipart"
)

// Request records a request answered (or a WebSocket operation started or connection closed).
func Request(iface, operation, code string, took time.Duration) {
	s := requestSeries.get([3]string{iface, operation, code})
	s.count.Inc()
	s.took.Observe(took.Seconds())
}

// requestSeries are the series of Request, by their labels.
var requestSeries = newSeries(func(l [3]string) requestSeriesOf {
	return requestSeriesOf{requests.WithLabelValues(l[:]...), requestDuration.WithLabelValues(l[:]...)}
})

type requestSeriesOf struct {
	count prometheus.Counter
	took  prometheus.Observer
}

// Connection records a WebSocket connection closed with code; it has no duration.
func Connection(code string) {
	requests.WithLabelValues(WebSocket, "connection", code).Inc()
}

// StoreOperation records one operation of a store of backend; errorKind is "" when it
// succeeded.
func StoreOperation(backend, operation, errorKind string, took time.Duration) {
	storeSeries.get([2]string{backend, operation}).Observe(took.Seconds())
	if errorKind != "" {
		storeErrors.WithLabelValues(backend, operation, errorKind).Inc()
	}
}

// storeSeries are the durations of StoreOperation, by their labels.
var storeSeries = newSeries(func(l [2]string) prometheus.Observer { return storeDuration.WithLabelValues(l[:]...) })

// StoreBreaker records that the breaker of a store of backend opened or closed.
func StoreBreaker(backend string, open bool) {
	if open {
		storeBreakerOpen.WithLabelValues(backend).Inc()
		storeBreakerOpened.WithLabelValues(backend).Inc()
		return
	}
	storeBreakerOpen.WithLabelValues(backend).Dec()
}

// Auth records the outcome of checking a request's credentials.
func Auth(method, outcome string) { authSeries.get([2]string{method, outcome}).Inc() }

// authSeries are the counters of Auth, by their labels.
var authSeries = newSeries(func(l [2]string) prometheus.Counter { return authOutcomes.WithLabelValues(l[:]...) })

// JWKSFetched records a fetch of the key set at url: its keys, or the error.
func JWKSFetched(url string, keys int, err error) {
	if err != nil {
		jwksFetches.WithLabelValues(url, "error").Inc()
		return
	}
	jwksFetches.WithLabelValues(url, "ok").Inc()
	jwksKeys.WithLabelValues(url).Set(float64(keys))
}

// JWKSClosed forgets the keys of a key set no config uses any more.
func JWKSClosed(url string) { jwksKeys.DeleteLabelValues(url) }

// WebSocketOpened and WebSocketClosed count the connections open.
func WebSocketOpened() { wsConnections.Inc() }

// WebSocketClosed: see WebSocketOpened.
func WebSocketClosed() { wsConnections.Dec() }

// StreamOpened and StreamClosed count the subscriptions streamed over HTTP, by interface.
func StreamOpened(iface string) { streams.WithLabelValues(iface).Inc() }

// StreamClosed: see StreamOpened.
func StreamClosed(iface string) { streams.WithLabelValues(iface).Dec() }

// FeedStarted and FeedStopped count the distinct subscription executions.
func FeedStarted() { feeds.Inc() }

// FeedStopped: see FeedStarted.
func FeedStopped() { feeds.Dec() }

// SubscriberJoined and SubscriberLeft count the subscriptions open, on WebSockets and HTTP streams.
func SubscriberJoined() { subscribers.Inc() }

// ClientMemory adds n (less than 0: takes) to the bytes clients' connections hold.
func ClientMemory(n int64) { clientMemory.Add(float64(n)) }

// SubscriberLeft: see SubscriberJoined.
func SubscriberLeft() { subscribers.Dec() }

// EventPublished counts a write published.
func EventPublished() { eventsPublished.Inc() }

// EventsDelivered counts an event queued to n subscribers.
func EventsDelivered(n int) { eventsDelivered.Add(float64(n)) }

// The stages of caddy_posts_events_dropped_total.
const (
	StageFeed       = "feed"
	StageConnection = "connection"
)

// EventsDropped counts n events lost at stage to a consumer that fell behind.
func EventsDropped(stage string, n int) { eventsDropped.WithLabelValues(stage).Add(float64(n)) }

// The events of caddy_posts_document_cache_total and caddy_posts_post_cache_total.
const (
	CacheHit          = "hit"
	CacheMiss         = "miss"
	CacheRegistration = "registration"
	CacheEviction     = "eviction"
)

// DocumentCache counts an event of the cache of prepared documents.
func DocumentCache(event string) { documentCache.WithLabelValues(event).Inc() }

// PostCache counts an event of the embedded store's cache of posts: CacheHit, CacheMiss or
// CacheEviction.
func PostCache(event string) { postCacheSeries.get(event).Inc() }

var postCacheSeries = newSeries(func(event string) prometheus.Counter { return postCache.WithLabelValues(event) })

// PostCacheBytes adds n, positive or negative, to what the caches of posts hold.
func PostCacheBytes(n int64) { postCacheBytes.Add(float64(n)) }

// LimitRefused counts a refusal for the limit that the subdirective named limit sets.
func LimitRefused(limit string) { limitRefusals.WithLabelValues(limit).Inc() }

// The outcomes of caddy_posts_relay_events_total.
const (
	RelayRelayed   = "relayed"
	RelayRecovered = "recovered"
)

// RelayEvent counts an event of the log, by outcome.
func RelayEvent(outcome string) { relayEvents.WithLabelValues(outcome).Inc() }

// RelayLag records the time from an event's recording to its hand-off here.
func RelayLag(d time.Duration) { relayLag.Observe(d.Seconds()) }

// The stages of caddy_posts_relay_errors_total.
const (
	RelayTail    = "tail"
	RelayExpire  = "expire"
	RelayRecover = "recover"
)

// RelayError counts a failure of the follower of the event log at stage.
func RelayError(stage string) { relayErrors.WithLabelValues(stage).Inc() }

// EventLogStats records what the event log holds.
func EventLogStats(events, oldest, last int64) {
	eventLogEvents.Set(float64(events))
	eventLogOldest.Set(float64(oldest))
	eventLogLast.Set(float64(last))
}

// The outcomes of caddy_posts_resumes_total.
const (
	ResumeOK      = "ok"
	ResumeExpired = "expired"
	ResumeRefused = "refused"
)

// Resumed counts a subscription started with resumeFrom, by outcome.
func Resumed(outcome string) { resumes.WithLabelValues(outcome).Inc() }

// EventReplayed counts a response a resumed subscription received from the log.
func EventReplayed() { eventsReplayed.Inc() }

// series are the children of vectors, each found once by its label values rather than on
// every call: WithLabelValues hashes the values and takes the vector's lock each time, which
// every request paid four times (its count and duration, its store operation, its credentials).
// Reads take no lock; a series seen for the first time copies the map. Only vectors whose
// series are never deleted go through it.
type series[K comparable, V any] struct {
	of    func(K) V
	mu    sync.Mutex // held by a writer of known
	known atomic.Pointer[map[K]V]
}

// maxSeries bounds what series keeps: labels come from short fixed lists, so more would be a
// bug elsewhere, which then costs a lookup in the vector rather than memory here.
const maxSeries = 1024

func newSeries[K comparable, V any](of func(K) V) *series[K, V] {
	s := &series[K, V]{of: of}
	s.known.Store(&map[K]V{})
	return s
}

// get is the series of the labels l.
func (s *series[K, V]) get(l K) V {
	if v, ok := (*s.known.Load())[l]; ok {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	known := *s.known.Load()
	if v, ok := known[l]; ok {
		return v
	}
	v := s.of(l)
	if len(known) < maxSeries {
		next := maps.Clone(known)
		next[l] = v
		s.known.Store(&next)
	}
	return v
}
