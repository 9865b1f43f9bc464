// The Kafka Streams side of aiostreams' differential oracle (tests/oracle/).
//
// Reads cases from stdin, one JSON object per line, and prints one JSON line per case.
//
//   {"id": "c1", "mode": "run", "ops": [...], "inputs": [...], "outputs": ["out", ...],
//    "config": {StreamsConfig name: value, ...} (optional overrides)}
//     builds the topology described by "ops" with the Kafka Streams DSL (the vocabulary is
//     documented in tests/oracle/oracle_spec.py, which builds the same topology in aiostreams),
//     runs it in a fresh TopologyTestDriver (caching off, a fresh state dir; the DSL's
//     stores are RocksDB: DEFAULT_DSL_STORE_CONFIG below has no effect on a StreamsBuilder
//     made without a TopologyConfig, and window retention follows RocksDB's rule), pipes "inputs" in order and prints every record of every output topic:
//   -> {"id": "c1", "ok": true, "outputs": {"out": [{"k": hex|null, "v": hex|null,
//                                                      "ts": ms, "h": [[name, hex], ...]}]}}
//
//   {"id": "d1", "mode": "deserialize", "kind": "time"|"session", "size": ms, "keys": [hex]}
//     reads windowed keys with Kafka Streams' TimeWindowedDeserializer (window size "size")
//     or SessionWindowedDeserializer:
//   -> {"id": "d1", "ok": true, "keys": [{"key": str, "start": ms, "end": ms} | {"error": msg}]}
//
// A case that fails prints {"id": ..., "ok": false, "error": "..."}; the process goes on.
// Keys are strings (StringSerde) or null; values are longs (LongSerde) or null.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.CogroupedKStream;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.Suppressed.BufferConfig;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.TimeWindowedCogroupedKStream;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.test.TestRecord;

public final class Oracle {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HexFormat HEX = HexFormat.of();
    private static int counter = 0;

    /** What a variable of the spec holds, and how its keys are windowed ("" when not). */
    private record Slot(Object value, String windowing, long sizeMs) {}

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            ObjectNode reply = JSON.createObjectNode();
            try {
                JsonNode request = JSON.readTree(line);
                reply.put("id", request.path("id").asText());
                if ("deserialize".equals(request.path("mode").asText())) {
                    reply.set("keys", deserialize(request));
                } else {
                    reply.set("outputs", run(request));
                }
                reply.put("ok", true);
            } catch (Throwable e) {
                reply.put("ok", false);
                StringBuilder why = new StringBuilder(e.toString());
                for (Throwable cause = e.getCause(); cause != null; cause = cause.getCause()) {
                    why.append("; caused by ").append(cause);  // the root cause says what
                }
                reply.put("error", why.toString());
            }
            out.println(JSON.writeValueAsString(reply));
            out.flush();
        }
    }

    // -- the consumer-side check of windowed keys ------------------------------------------

    private static ArrayNode deserialize(JsonNode request) {
        boolean session = "session".equals(request.path("kind").asText());
        Deserializer<Windowed<String>> reader = session
            ? WindowedSerdes.sessionWindowedSerdeFrom(String.class).deserializer()
            : WindowedSerdes.timeWindowedSerdeFrom(String.class, request.path("size").asLong())
                .deserializer();
        ArrayNode keys = JSON.createArrayNode();
        for (JsonNode hex : request.path("keys")) {
            ObjectNode key = keys.addObject();
            try {
                Windowed<String> w = reader.deserialize("t", HEX.parseHex(hex.asText()));
                key.put("key", w.key());
                key.put("start", w.window().start());
                key.put("end", w.window().end());
            } catch (RuntimeException e) {
                key.put("error", e.toString());
            }
        }
        return keys;
    }

    // -- running a case --------------------------------------------------------------------

    private static ObjectNode run(JsonNode request) throws Exception {
        StreamsBuilder builder = new StreamsBuilder();
        Map<String, Slot> vars = new HashMap<>();
        for (JsonNode op : request.path("ops")) {
            apply(builder, vars, op);
        }
        Topology topology = builder.build();
        File stateDir = Files.createTempDirectory("oracle-state-").toFile();
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "oracle-" + (++counter));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.LongSerde.class);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_DSL_STORE_CONFIG, StreamsConfig.IN_MEMORY);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.getAbsolutePath());
        // Kafka throttles the emission of non-joined stream-stream join results by wall-clock
        // time (1 s); the oracle compares the semantics without the throttle.
        props.put("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", 0L);
        // Likewise Kafka emits a window-close aggregation's final results at most once per
        // second of wall-clock time; the oracle compares the semantics without the throttle.
        props.put("__emit.interval.ms.kstreams.windowed.aggregation__", 0L);
        // A case may override settings (tests/oracle/deviations.py shows Kafka's defaults).
        request.path("config").fields().forEachRemaining(e -> props.put(e.getKey(), e.getValue().asText()));
        ObjectNode outputs = JSON.createObjectNode();
        try (TopologyTestDriver driver = new TopologyTestDriver(topology, props)) {
            Map<String, TestInputTopic<String, Long>> inputs = new HashMap<>();
            for (JsonNode record : request.path("inputs")) {
                String topic = record.path("topic").asText();
                TestInputTopic<String, Long> input = inputs.computeIfAbsent(topic,
                    t -> driver.createInputTopic(t, new StringSerializer(), new LongSerializer()));
                RecordHeaders headers = new RecordHeaders();
                for (JsonNode h : record.path("headers")) {
                    headers.add(h.get(0).asText(), HEX.parseHex(h.get(1).asText()));
                }
                String key = record.path("key").isNull() ? null : record.path("key").asText();
                Long value = record.path("value").isNull() ? null : record.path("value").asLong();
                input.pipeInput(new TestRecord<>(key, value, headers, record.path("ts").asLong()));
            }
            for (JsonNode name : request.path("outputs")) {
                TestOutputTopic<byte[], byte[]> topic = driver.createOutputTopic(
                    name.asText(), new ByteArrayDeserializer(), new ByteArrayDeserializer());
                ArrayNode records = outputs.putArray(name.asText());
                for (TestRecord<byte[], byte[]> r : topic.readRecordsToList()) {
                    ObjectNode o = records.addObject();
                    o.put("k", r.key() == null ? null : HEX.formatHex(r.key()));
                    o.put("v", r.value() == null ? null : HEX.formatHex(r.value()));
                    o.put("ts", r.timestamp());
                    ArrayNode hs = o.putArray("h");
                    for (Header h : r.headers()) {
                        ArrayNode pair = hs.addArray();
                        pair.add(h.key());
                        pair.add(h.value() == null ? null : HEX.formatHex(h.value()));
                    }
                }
            }
        } finally {
            Utils.delete(stateDir);
        }
        return outputs;
    }

    // -- the spec's named functions (tests/oracle/oracle_spec.py implements the same) -------------

    private static boolean pick(Long v, long m, long r) {
        return v != null && Math.floorMod(v, m) == r;
    }

    private static Long affine(Long v, long a, long b) {
        return v == null ? null : v * a + b;
    }

    private static String bucket(String prefix, Long v, long n) {
        return v == null ? null : prefix + Math.floorMod(v, n);
    }

    private static long joined(Long left, Long right) {
        return (left == null ? -1 : left) * 1000 + (right == null ? -1 : right);
    }

    /** The foreign key of a left value: "f" + v mod n, none for a negative value. */
    private static String foreign(Long v, long n) {
        return v == null || v < 0 ? null : "f" + Math.floorMod(v, n);
    }

    private static List<Long> copies(Long v, long n) {
        if (v == null) {
            return Collections.emptyList();
        }
        List<Long> result = new ArrayList<>();
        for (long i = 0; i < n; i++) {
            result.add(v + i);
        }
        return result;
    }

    /** Null-safe sum: windowed aggregations hand null values to the aggregator. */
    private static Long total(Long a, Long b) {
        return (a == null ? 0 : a) + (b == null ? 0 : b);
    }

    /** Null-safe difference: the subtractor of a re-grouped table's aggregation. */
    private static Long minus(Long a, Long b) {
        return (a == null ? 0 : a) - (b == null ? 0 : b);
    }

    // -- building the topology ---------------------------------------------------------------

    @SuppressWarnings("unchecked")
    private static void apply(StreamsBuilder builder, Map<String, Slot> vars, JsonNode op) {
        String kind = op.path("op").asText();
        String id = op.path("id").asText();
        Slot from = vars.get(op.path("from").asText());
        Object src = from == null ? null : from.value();
        long m = op.path("m").asLong(1);
        long r = op.path("r").asLong(0);
        long a = op.path("a").asLong(1);
        long b = op.path("b").asLong(0);
        long n = op.path("n").asLong(1);
        Object result;
        switch (kind) {
            case "stream" -> result = builder.stream(op.path("topic").asText());
            case "table" -> result = op.has("versioned") ? versionedTable(builder, op, id)
                : builder.table(op.path("topic").asText(), Materialized.as("table-" + id));
            case "filter" -> {
                boolean not = op.path("not").asBoolean(false);
                result = src instanceof KTable<?, ?> t
                    ? ((KTable<Object, Long>) t).filter((k, v) -> pick(v, m, r) != not)
                    : ((KStream<Object, Long>) src).filter((k, v) -> pick(v, m, r) != not);
            }
            case "map_values" -> result = src instanceof KTable<?, ?> t
                ? ((KTable<Object, Long>) t).mapValues(v -> affine(v, a, b))
                : ((KStream<Object, Long>) src).mapValues(v -> affine(v, a, b));
            case "select_key" -> result = ((KStream<String, Long>) src)
                .selectKey((k, v) -> bucket("k", v, n));
            case "map" -> result = ((KStream<String, Long>) src)
                .map((k, v) -> KeyValue.pair(bucket("k", v, n), affine(v, a, b)));
            case "flat_map_values" -> result = ((KStream<String, Long>) src)
                .flatMapValues(v -> copies(v, n));
            case "merge" -> result = ((KStream<String, Long>) src)
                .merge((KStream<String, Long>) vars.get(op.path("other").asText()).value());
            case "branch" -> {
                Map<String, KStream<String, Long>> branches = ((KStream<String, Long>) src)
                    .split(Named.as(id + "_"))
                    .branch((k, v) -> pick(v, m, r), Branched.as("0"))
                    .defaultBranch(Branched.as("1"));
                vars.put(id + "_0", new Slot(branches.get(id + "_0"), "", 0));
                vars.put(id + "_1", new Slot(branches.get(id + "_1"), "", 0));
                return;
            }
            case "group_by_key" -> result = ((KStream<String, Long>) src).groupByKey();
            case "group_by" -> result = src instanceof KTable<?, ?> t
                ? ((KTable<Object, Long>) t).groupBy(  // Object: a windowed table's keys too
                    (k, v) -> KeyValue.pair(bucket("g", v, n), affine(v, a, b)))
                : ((KStream<String, Long>) src).groupBy((k, v) -> bucket("g", v, n));
            case "to_table" -> result = ((KStream<String, Long>) src).toTable();
            case "cogroup" -> result = src instanceof CogroupedKStream<?, ?> c
                ? ((CogroupedKStream<String, Long>) c).cogroup(
                    (KGroupedStream<String, Long>) vars.get(op.path("other").asText()).value(),
                    (k, v, agg) -> total(agg, affine(v, a, b)))
                : ((KGroupedStream<String, Long>) src).cogroup(
                    (String k, Long v, Long agg) -> total(agg, v));
            case "windowed_by" -> {
                long grace = op.path("grace").asLong();
                if (src instanceof CogroupedKStream<?, ?> c) {
                    long size = op.path("size").asLong();
                    vars.put(id, new Slot(((CogroupedKStream<String, Long>) c).windowedBy(TimeWindows
                        .ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace))
                        .advanceBy(Duration.ofMillis(op.path("advance").asLong(size)))), "time", size));
                    return;
                }
                KGroupedStream<String, Long> grouped = (KGroupedStream<String, Long>) src;
                switch (op.path("windows").asText()) {
                    case "session" -> {
                        vars.put(id, new Slot(emitting(op, grouped.windowedBy(SessionWindows
                            .ofInactivityGapAndGrace(Duration.ofMillis(op.path("gap").asLong()),
                                Duration.ofMillis(grace)))), "session", 0));
                        return;
                    }
                    case "sliding" -> {
                        long diff = op.path("diff").asLong();
                        vars.put(id, new Slot(emitting(op, grouped.windowedBy(SlidingWindows
                            .ofTimeDifferenceAndGrace(Duration.ofMillis(diff), Duration.ofMillis(grace)))),
                            "time", diff));
                        return;
                    }
                    default -> {
                        long size = op.path("size").asLong();
                        long advance = op.path("advance").asLong(size);
                        TimeWindowedKStream<String, Long> windowed = grouped.windowedBy(TimeWindows
                            .ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace))
                            .advanceBy(Duration.ofMillis(advance)));
                        if ("on_window_close".equals(op.path("emit").asText())) {
                            windowed = windowed.emitStrategy(EmitStrategy.onWindowClose());
                        }
                        vars.put(id, new Slot(windowed, "time", size));
                        return;
                    }
                }
            }
            case "count", "reduce", "aggregate" -> {
                long init = op.path("init").asLong(0);
                String windowing = from.windowing();
                if (src instanceof TimeWindowedCogroupedKStream<?, ?> c) {
                    result = ((TimeWindowedCogroupedKStream<String, Long>) c).aggregate(() -> init,
                        Materialized.with(Serdes.String(), Serdes.Long()));
                } else if (src instanceof CogroupedKStream<?, ?> c) {
                    result = ((CogroupedKStream<String, Long>) c).aggregate(() -> init);
                } else if (src instanceof KGroupedTable<?, ?> g) {
                    KGroupedTable<String, Long> grouped = (KGroupedTable<String, Long>) g;
                    result = switch (kind) {
                        case "count" -> grouped.count();
                        case "reduce" -> grouped.reduce(Oracle::total, Oracle::minus);
                        default -> grouped.aggregate(() -> init, (k, v, agg) -> total(agg, v),
                            (k, v, agg) -> minus(agg, v));
                    };
                } else if (src instanceof KGroupedStream<?, ?> g) {
                    KGroupedStream<String, Long> grouped = (KGroupedStream<String, Long>) g;
                    result = switch (kind) {
                        case "count" -> grouped.count();
                        case "reduce" -> grouped.reduce(Oracle::total);
                        default -> grouped.aggregate(() -> init, (k, v, agg) -> total(agg, v));
                    };
                } else if (src instanceof TimeWindowedKStream<?, ?> w) {
                    TimeWindowedKStream<String, Long> windowed = (TimeWindowedKStream<String, Long>) w;
                    // Serdes given so that the table knows its windowed key serde (a
                    // suppression buffer needs it); they are the defaults.
                    result = switch (kind) {
                        case "count" -> windowed.count(Materialized.with(Serdes.String(), Serdes.Long()));
                        case "reduce" -> windowed.reduce(Oracle::total,
                            Materialized.with(Serdes.String(), Serdes.Long()));
                        default -> windowed.aggregate(() -> init, (k, v, agg) -> total(agg, v),
                            Materialized.with(Serdes.String(), Serdes.Long()));
                    };
                } else {
                    SessionWindowedKStream<String, Long> windowed =
                        (SessionWindowedKStream<String, Long>) src;
                    result = switch (kind) {
                        case "count" -> windowed.count(Materialized.with(Serdes.String(), Serdes.Long()));
                        case "reduce" -> windowed.reduce(Oracle::total,
                            Materialized.with(Serdes.String(), Serdes.Long()));
                        default -> windowed.aggregate(() -> init, (k, v, agg) -> total(agg, v),
                            (k, x, y) -> total(x, y), Materialized.with(Serdes.String(), Serdes.Long()));
                    };
                }
                vars.put(id, new Slot(result, windowing, from.sizeMs()));
                return;
            }
            case "suppress" -> {
                KTable<Object, Long> table = (KTable<Object, Long>) src;
                boolean bounded = op.has("max_records");
                boolean shutDown = "shut_down".equals(op.path("when_full").asText());
                if ("window_closes".equals(op.path("until").asText())) {
                    result = table.suppress((Suppressed<Object>) (Suppressed<?>) Suppressed
                        .untilWindowCloses(bounded
                            ? BufferConfig.maxRecords(op.path("max_records").asLong()).shutDownWhenFull()
                            : BufferConfig.unbounded()));
                } else {
                    BufferConfig<?> config = !bounded ? BufferConfig.unbounded()
                        : shutDown ? BufferConfig.maxRecords(op.path("max_records").asLong()).shutDownWhenFull()
                        : BufferConfig.maxRecords(op.path("max_records").asLong()).emitEarlyWhenFull();
                    result = table.suppress(Suppressed.untilTimeLimit(
                        Duration.ofMillis(op.path("wait").asLong()), config));
                }
            }
            case "to_stream" -> {
                vars.put(id, new Slot(((KTable<Object, Long>) src).toStream(), from.windowing(),
                    from.sizeMs()));
                return;
            }
            case "to" -> {
                KStream<Object, Long> stream = (KStream<Object, Long>) src;
                String topic = op.path("topic").asText();
                switch (from.windowing()) {
                    case "time" -> stream.to(topic, Produced.with((Serde<Object>) (Serde<?>)
                        WindowedSerdes.timeWindowedSerdeFrom(String.class, from.sizeMs()),
                        Serdes.Long()));
                    case "session" -> stream.to(topic, Produced.with((Serde<Object>) (Serde<?>)
                        WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.Long()));
                    default -> stream.to(topic);
                }
                return;
            }
            case "global_table" -> result = builder.globalTable(op.path("topic").asText(),
                Materialized.as("global-" + id));
            case "join_global", "left_join_global" -> {
                KStream<String, Long> stream = (KStream<String, Long>) src;
                GlobalKTable<String, Long> global =
                    (GlobalKTable<String, Long>) vars.get(op.path("other").asText()).value();
                result = "join_global".equals(kind)
                    ? stream.join(global, (k, v) -> bucket("g", v, n), Oracle::joined)
                    : stream.leftJoin(global, (k, v) -> bucket("g", v, n), Oracle::joined);
            }
            case "fk_join", "fk_left_join" -> {
                KTable<String, Long> left = (KTable<String, Long>) src;
                KTable<String, Long> right = (KTable<String, Long>) vars.get(op.path("other").asText()).value();
                result = "fk_join".equals(kind)
                    ? left.join(right, (Long v) -> foreign(v, n), Oracle::joined)
                    : left.leftJoin(right, (Long v) -> foreign(v, n), Oracle::joined);
            }
            case "join", "left_join", "outer_join" -> result = join(kind, src,
                vars.get(op.path("other").asText()).value(), op);
            default -> throw new IllegalArgumentException("unknown op " + kind);
        }
        // a table re-grouped by a bucket of its values has plain keys again, windowed or not
        boolean plain = from == null || ("group_by".equals(kind) && src instanceof KTable<?, ?>);
        String windowing = plain ? "" : from.windowing();
        vars.put(id, new Slot(result, windowing, from == null ? 0 : from.sizeMs()));
    }

    // -- emit strategy on_window_close of session and sliding windows (issue 18) ------------

    private static boolean onWindowClose(JsonNode op) {
        return "on_window_close".equals(op.path("emit").asText());
    }

    private static SessionWindowedKStream<String, Long> emitting(JsonNode op,
            SessionWindowedKStream<String, Long> windowed) {
        return onWindowClose(op) ? windowed.emitStrategy(EmitStrategy.onWindowClose()) : windowed;
    }

    private static TimeWindowedKStream<String, Long> emitting(JsonNode op,
            TimeWindowedKStream<String, Long> windowed) {
        return onWindowClose(op) ? windowed.emitStrategy(EmitStrategy.onWindowClose()) : windowed;
    }

    @SuppressWarnings("unchecked")
    private static Object join(String kind, Object left, Object right, JsonNode op) {
        if (left instanceof KTable<?, ?> lt) {
            KTable<String, Long> l = (KTable<String, Long>) lt;
            KTable<String, Long> rt = (KTable<String, Long>) right;
            return switch (kind) {
                case "join" -> l.join(rt, Oracle::joined);
                case "left_join" -> l.leftJoin(rt, Oracle::joined);
                default -> l.outerJoin(rt, Oracle::joined);
            };
        }
        KStream<String, Long> l = (KStream<String, Long>) left;
        if (right instanceof KTable<?, ?> t) {
            KTable<String, Long> rt = (KTable<String, Long>) t;
            if (op.has("grace")) {
                return joinWithGrace(kind, l, rt, op);
            }
            return "join".equals(kind) ? l.join(rt, Oracle::joined) : l.leftJoin(rt, Oracle::joined);
        }
        KStream<String, Long> rs = (KStream<String, Long>) right;
        JoinWindows windows = JoinWindows
            .ofTimeDifferenceAndGrace(Duration.ofMillis(op.path("before").asLong()),
                Duration.ofMillis(op.path("grace").asLong()))
            .after(Duration.ofMillis(op.path("after").asLong()));
        return switch (kind) {
            case "join" -> l.join(rs, Oracle::joined, windows);
            case "left_join" -> l.leftJoin(rs, Oracle::joined, windows);
            default -> l.outerJoin(rs, Oracle::joined, windows);
        };
    }

    // -- versioned tables (KIP-889, KIP-914) and stream-table joins with grace (KIP-923) ----

    /** {@code "table"} with {@code "versioned": <history retention ms>}. */
    private static KTable<String, Long> versionedTable(StreamsBuilder builder, JsonNode op,
                                                       String id) {
        return builder.table(op.path("topic").asText(),
            Materialized.<String, Long>as(Stores.persistentVersionedKeyValueStore(
                "table-" + id, Duration.ofMillis(op.path("versioned").asLong()))));
    }

    /** A stream-table join or left join with {@code "grace"} ms (the table is versioned). */
    private static KStream<String, Long> joinWithGrace(String kind, KStream<String, Long> l,
                                                       KTable<String, Long> rt, JsonNode op) {
        Joined<String, Long, Long> joined = Joined.with(Serdes.String(), Serdes.Long(), Serdes.Long())
            .withGracePeriod(Duration.ofMillis(op.path("grace").asLong()));
        return "join".equals(kind) ? l.join(rt, Oracle::joined, joined)
            : l.leftJoin(rt, Oracle::joined, joined);
    }

    private Oracle() {}
}
