// Kafka Streams' side of `python -m benchmarks.nexmark` (issue 40): the Nexmark queries in
// Kafka Streams' DSL, operator for operator the topologies of benchmarks/nexmark/queries.py
// (read its docstring for what each query computes and how q4 is simplified), over the wire
// format of benchmarks/nexmark/model.py (big-endian longs; a person's state 2 ASCII bytes).
//
//   java -cp <kafka-streams jars>:<classes> Nexmark run <bootstrap> <application.id> <query>
//        <input prefix> <output topic> <expected inputs> <state dir> <timeout seconds>
//        [<record cache bytes>]
//
// runs one query on a broker with one stream thread (commit.interval.ms 1000, aiostreams'
// default; the record cache at its default, 10 MB, unless given; RocksDB stores), and prints one JSON line:
// {"inputs": N, "outputs": M, "seconds": S, "cpu_seconds": C}: from the first input record
// read to the last output record written (or the last input read, if later), and the whole
// JVM's CPU time over the same span (every thread). The run ends when every input was read
// and the group has committed every record of its source and internal topics (so every
// output is flushed). Exit code 2 when that did not happen within the timeout.
//
//   java ... Nexmark drive <query> [<query> ...]
//
// runs each query in a TopologyTestDriver over the records on stdin (one per line:
// `<persons|auctions|bids> <key hex> <value hex> <timestamp ms>`) and prints, per query, a
// line `query <q>`, then one line `<key hex> <value hex or ->` per output record (the
// differential test, tests/oracle/test_oracle_nexmark.py).

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.function.Function;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.test.TestRecord;

public final class Nexmark {
    private Nexmark() {}

    static final Duration WINDOW = Duration.ofSeconds(10);
    static final Duration HOP = Duration.ofSeconds(2);
    static final Duration GRACE = Duration.ofSeconds(3600);
    static final Set<String> Q3_STATES = Set.of("OR", "ID", "CA");

    record Person(long id, long dateTime, String state) {}
    record Auction(long id, long seller, long category, long initialBid, long dateTime,
                   long expires) {}
    record Bid(long auction, long bidder, long price, long dateTime) {}
    record Pair(long first, long second) {}
    record Triple(long first, long second, long third) {}
    record Seller(long seller, String state, long auction) {}

    // -- serdes: the layouts of benchmarks/nexmark/model.py -----------------------------------

    static <T> Serde<T> serde(int size, Function<T, ByteBuffer> write,
                              Function<ByteBuffer, T> read) {
        Serializer<T> ser = (topic, v) -> {
            if (v == null) {
                return null;
            }
            ByteBuffer b = write.apply(v);
            if (b.position() != size) {
                throw new IllegalStateException("wrote " + b.position() + " bytes, not " + size);
            }
            return b.array();
        };
        Deserializer<T> de = (topic, data) -> {
            if (data == null) {
                return null;
            }
            if (data.length != size) {
                throw new IllegalArgumentException(topic + ": a record of " + data.length
                    + " bytes, expected " + size);
            }
            return read.apply(ByteBuffer.wrap(data));
        };
        return Serdes.serdeFrom(ser, de);
    }

    static String state(ByteBuffer b) {
        byte[] s = new byte[2];
        b.get(s);
        return new String(s, StandardCharsets.US_ASCII);
    }

    static final Serde<Long> LONG = Serdes.Long();
    static final Serde<Person> PERSON = serde(18,
        p -> ByteBuffer.allocate(18).putLong(p.id()).putLong(p.dateTime())
            .put(p.state().getBytes(StandardCharsets.US_ASCII)),
        b -> new Person(b.getLong(), b.getLong(), state(b)));
    static final Serde<Auction> AUCTION = serde(48,
        a -> ByteBuffer.allocate(48).putLong(a.id()).putLong(a.seller()).putLong(a.category())
            .putLong(a.initialBid()).putLong(a.dateTime()).putLong(a.expires()),
        b -> new Auction(b.getLong(), b.getLong(), b.getLong(), b.getLong(), b.getLong(),
                         b.getLong()));
    static final Serde<Bid> BID = serde(32,
        v -> ByteBuffer.allocate(32).putLong(v.auction()).putLong(v.bidder())
            .putLong(v.price()).putLong(v.dateTime()),
        b -> new Bid(b.getLong(), b.getLong(), b.getLong(), b.getLong()));
    static final Serde<Pair> PAIR = serde(16,
        p -> ByteBuffer.allocate(16).putLong(p.first()).putLong(p.second()),
        b -> new Pair(b.getLong(), b.getLong()));
    static final Serde<Triple> TRIPLE = serde(24,
        t -> ByteBuffer.allocate(24).putLong(t.first()).putLong(t.second()).putLong(t.third()),
        b -> new Triple(b.getLong(), b.getLong(), b.getLong()));
    static final Serde<Seller> SELLER = serde(18,
        s -> ByteBuffer.allocate(18).putLong(s.seller())
            .put(s.state().getBytes(StandardCharsets.US_ASCII)).putLong(s.auction()),
        b -> new Seller(b.getLong(), state(b), b.getLong()));

    // -- the queries' functions (queries.py has the same) -------------------------------------

    static Bid higherBid(Bid a, Bid b) {
        int c = Long.compare(b.price(), a.price());
        if (c == 0) {
            c = Long.compare(b.dateTime(), a.dateTime());
        }
        if (c == 0) {
            c = Long.compare(b.bidder(), a.bidder());
        }
        if (c == 0) {
            c = Long.compare(b.auction(), a.auction());
        }
        return c > 0 ? b : a;
    }

    static Pair hotter(Pair a, Pair b) {
        int c = Long.compare(b.second(), a.second());
        if (c == 0) {
            c = Long.compare(a.first(), b.first());
        }
        return c > 0 ? b : a;
    }

    static long windowStart(long ms) {
        long size = WINDOW.toMillis();
        return ms - Math.floorMod(ms, size);
    }

    static Triple newUser(Person p, Auction a) {
        long start = windowStart(p.dateTime());
        return start == windowStart(a.dateTime()) ? new Triple(p.id(), start, a.id()) : null;
    }

    /** Called per input record read and per output record written (the timing). */
    interface Hooks {
        void seen();

        void produced();
    }

    static final List<String> QUERIES = List.of("q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8");

    static Topology build(String query, String prefix, String output, Hooks h, Properties props) {
        StreamsBuilder builder = new StreamsBuilder();
        java.util.function.Supplier<KStream<Long, Bid>> bids = () -> builder.stream(
            prefix + "-bids", Consumed.with(LONG, BID)).peek((k, v) -> h.seen());
        switch (query) {
            case "q0" -> bids.get().peek((k, v) -> h.produced())
                .to(output, Produced.with(LONG, BID));
            case "q1" -> bids.get()
                .mapValues(b -> new Bid(b.auction(), b.bidder(), b.price() * 908 / 1000,
                                        b.dateTime()))
                .peek((k, v) -> h.produced()).to(output, Produced.with(LONG, BID));
            case "q2" -> bids.get().filter((k, b) -> b.auction() % 123 == 0)
                .mapValues(b -> new Pair(b.auction(), b.price()))
                .peek((k, v) -> h.produced()).to(output, Produced.with(LONG, PAIR));
            case "q3" -> {
                KTable<Long, Person> persons = persons(builder, prefix, h)
                    .filter((k, p) -> Q3_STATES.contains(p.state()))
                    .toTable(Materialized.with(LONG, PERSON));
                KTable<Long, Auction> auctions = auctions(builder, prefix, h)
                    .filter((k, a) -> a.category() == 10)
                    .toTable(Materialized.with(LONG, AUCTION));
                Function<Auction, Long> seller = Auction::seller;
                auctions.join(persons, seller,
                        (a, p) -> new Seller(p.id(), p.state(), a.id()),
                        Materialized.with(LONG, SELLER))
                    .toStream().peek((k, v) -> h.produced())
                    .to(output, Produced.with(LONG, SELLER));
            }
            case "q4" -> {
                KTable<Long, Bid> highest = bids.get()
                    .groupByKey(Grouped.with(LONG, BID))
                    .reduce(Nexmark::higherBid, Materialized.with(LONG, BID));
                KTable<Long, Auction> auctions = auctions(builder, prefix, h)
                    .toTable(Materialized.with(LONG, AUCTION));
                highest.join(auctions, (b, a) -> new Pair(a.category(), b.price()))
                    .groupBy((k, cp) -> KeyValue.pair(cp.first(), cp.second()),
                             Grouped.with(LONG, LONG))
                    .aggregate(() -> new Pair(0, 0),
                               (k, price, agg) -> new Pair(agg.first() + price,
                                                           agg.second() + 1),
                               (k, price, agg) -> new Pair(agg.first() - price,
                                                           agg.second() - 1),
                               Materialized.with(LONG, PAIR))
                    .toStream()
                    .mapValues(agg -> agg == null || agg.second() == 0
                        ? null : agg.first() / agg.second())
                    .peek((k, v) -> h.produced()).to(output, Produced.with(LONG, LONG));
            }
            case "q5" -> bids.get().groupByKey(Grouped.with(LONG, BID))
                .windowedBy(TimeWindows.ofSizeAndGrace(WINDOW, GRACE).advanceBy(HOP))
                .count(Materialized.with(LONG, LONG))
                .toStream()
                .map((Windowed<Long> w, Long n) -> KeyValue.pair(w.window().start(),
                                                                 new Pair(w.key(), n)))
                .groupByKey(Grouped.with(LONG, PAIR))
                .reduce(Nexmark::hotter, Materialized.with(LONG, PAIR))
                .toStream().peek((k, v) -> h.produced()).to(output, Produced.with(LONG, PAIR));
            case "q7" -> bids.get().groupBy((k, b) -> 0L, Grouped.with(LONG, BID))
                .windowedBy(TimeWindows.ofSizeAndGrace(WINDOW, GRACE))
                .reduce(Nexmark::higherBid, Materialized.with(LONG, BID))
                .toStream().peek((k, v) -> h.produced())
                .to(output, Produced.with(
                    WindowedSerdes.timeWindowedSerdeFrom(Long.class, WINDOW.toMillis()), BID));
            case "q8" -> {
                KStream<Long, Auction> bySeller = auctions(builder, prefix, h)
                    .selectKey((k, a) -> a.seller())
                    .repartition(Repartitioned.with(LONG, AUCTION));
                persons(builder, prefix, h)
                    .join(bySeller, Nexmark::newUser,
                          JoinWindows.ofTimeDifferenceAndGrace(WINDOW, GRACE),
                          StreamJoined.with(LONG, PERSON, AUCTION))
                    .filter((k, v) -> v != null)
                    .peek((k, v) -> h.produced()).to(output, Produced.with(LONG, TRIPLE));
            }
            default -> throw new IllegalArgumentException(
                "unknown Nexmark query " + query + "; choose from " + QUERIES);
        }
        return builder.build(props);
    }

    static KStream<Long, Person> persons(StreamsBuilder builder, String prefix, Hooks h) {
        return builder.stream(prefix + "-persons", Consumed.with(LONG, PERSON))
            .peek((k, v) -> h.seen());
    }

    static KStream<Long, Auction> auctions(StreamsBuilder builder, String prefix, Hooks h) {
        return builder.stream(prefix + "-auctions", Consumed.with(LONG, AUCTION))
            .peek((k, v) -> h.seen());
    }

    // -- run: one query on a broker, timed ----------------------------------------------------

    static final class Timing implements Hooks {
        long inputs;
        long outputs;
        volatile long seenCount;
        volatile long firstNanos;
        volatile long firstCpu;
        volatile long lastNanos;

        @Override
        public void seen() {
            if (inputs == 0) {
                firstNanos = System.nanoTime();
                firstCpu = processCpuNanos();
            }
            inputs++;
            seenCount = inputs;
            lastNanos = System.nanoTime();
        }

        @Override
        public void produced() {
            outputs++;
            lastNanos = System.nanoTime();
        }
    }

    static void run(String[] args) throws Exception {
        String bootstrap = args[1];
        String appId = args[2];
        String query = args[3];
        String prefix = args[4];
        String output = args[5];
        long expected = Long.parseLong(args[6]);
        String stateDir = args[7];
        long timeout = Long.parseLong(args[8]);
        String cacheBytes = args.length > 9 ? args[9] : null;

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG),
            "earliest");
        if (cacheBytes != null) {
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, Long.parseLong(cacheBytes));
        }

        Timing timing = new Timing();
        Topology topology = build(query, prefix, output, timing, props);
        Set<String> sources = sourceTopics(topology);
        KafkaStreams streams = new KafkaStreams(topology, props);
        long deadline = System.nanoTime() + timeout * 1_000_000_000L;
        List<long[]> samples = new ArrayList<>(); // (nanos, cpu nanos) every 20 ms
        boolean done = false;
        try (Admin admin = Admin.create(Map.of(
                AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            streams.cleanUp();
            streams.start();
            long nextCheck = 0;
            while (System.nanoTime() < deadline) {
                samples.add(new long[] {System.nanoTime(), processCpuNanos()});
                if (streams.state() == KafkaStreams.State.ERROR) {
                    break;
                }
                if (timing.seenCount >= expected && System.nanoTime() >= nextCheck) {
                    if (caughtUp(admin, appId, sources)) {
                        done = true;
                        break;
                    }
                    nextCheck = System.nanoTime() + 200_000_000L;
                }
                Thread.sleep(20);
            }
        }
        long end = timing.lastNanos;
        long endCpu = -1;
        for (long[] s : samples) {
            if (s[0] >= end) {
                endCpu = s[1];
                break;
            }
        }
        streams.close(Duration.ofSeconds(30));
        streams.cleanUp();
        if (!done) {
            System.err.println("Nexmark " + query + ": read " + timing.seenCount + " of "
                + expected + " inputs and did not catch up within " + timeout + " s (state "
                + streams.state() + ")");
            System.exit(2);
        }
        if (endCpu < 0) {
            endCpu = samples.get(samples.size() - 1)[1];
        }
        double seconds = (end - timing.firstNanos) / 1e9;
        double cpu = (endCpu - timing.firstCpu) / 1e9;
        System.out.printf("{\"inputs\": %d, \"outputs\": %d, \"seconds\": %.4f, "
            + "\"cpu_seconds\": %.4f}%n", timing.inputs, timing.outputs, seconds, cpu);
    }

    /** The topics a topology's sources read: inputs, repartition and foreign-key join topics
     * (internal ones as described, without the application id's prefix). */
    static Set<String> sourceTopics(Topology topology) {
        Set<String> sources = new java.util.HashSet<>();
        topology.describe().subtopologies().forEach(s -> s.nodes().forEach(n -> {
            if (n instanceof org.apache.kafka.streams.TopologyDescription.Source src) {
                sources.addAll(src.topicSet());
            }
        }));
        return sources;
    }

    /** Whether group appId has committed every record of the topics it reads. */
    static boolean caughtUp(Admin admin, String appId, Set<String> sources) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> committed = admin
            .listConsumerGroupOffsets(appId).partitionsToOffsetAndMetadata().get();
        Set<String> existing = admin.listTopics().names().get();
        Set<String> read = new java.util.HashSet<>();
        for (String t : sources) {
            if (existing.contains(t)) {
                read.add(t);
            } else if (existing.contains(appId + "-" + t)) {
                read.add(appId + "-" + t);
            } else {
                return false; // not created yet
            }
        }
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        for (Map.Entry<String, TopicDescription> e
                : admin.describeTopics(read).allTopicNames().get().entrySet()) {
            for (TopicPartitionInfo p : e.getValue().partitions()) {
                latest.put(new TopicPartition(e.getKey(), p.partition()), OffsetSpec.latest());
            }
        }
        for (Map.Entry<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> e
                : admin.listOffsets(latest).all().get().entrySet()) {
            long end = e.getValue().offset();
            OffsetAndMetadata at = committed.get(e.getKey());
            if (end > 0 && (at == null || at.offset() < end)) {
                return false;
            }
        }
        return true;
    }

    static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean)
            ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    // -- drive: the queries in a TopologyTestDriver (the differential test) -------------------

    static void drive(String[] args) throws Exception {
        List<String[]> inputs = new ArrayList<>();
        try (java.io.BufferedReader in = new java.io.BufferedReader(
                new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                if (!line.isBlank()) {
                    inputs.add(line.trim().split(" "));
                }
            }
        }
        HexFormat hex = HexFormat.of();
        Hooks none = new Hooks() {
            @Override
            public void seen() {}

            @Override
            public void produced() {}
        };
        StringBuilder out = new StringBuilder();
        for (int i = 1; i < args.length; i++) {
            String query = args[i];
            Properties props = new Properties();
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, "nexmark-drive-" + query);
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092");
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
            Topology topology = build(query, "nx", "out", none, props);
            try (TopologyTestDriver driver = new TopologyTestDriver(topology, props)) {
                Map<String, TestInputTopic<byte[], byte[]>> topics = new HashMap<>();
                Set<String> sources = sourceTopics(topology);
                for (String[] r : inputs) {
                    String topic = "nx-" + r[0];
                    if (!sources.contains(topic)) {
                        continue;
                    }
                    topics.computeIfAbsent(topic, t -> driver.createInputTopic(t,
                            Serdes.ByteArray().serializer(), Serdes.ByteArray().serializer()))
                        .pipeInput(new TestRecord<>(hex.parseHex(r[1]), hex.parseHex(r[2]),
                            java.time.Instant.ofEpochMilli(Long.parseLong(r[3]))));
                }
                TestOutputTopic<byte[], byte[]> result = driver.createOutputTopic("out",
                    Serdes.ByteArray().deserializer(), Serdes.ByteArray().deserializer());
                out.append("query ").append(query).append('\n');
                for (TestRecord<byte[], byte[]> r : result.readRecordsToList()) {
                    out.append(r.key() == null ? "-" : hex.formatHex(r.key())).append(' ')
                        .append(r.value() == null ? "-" : hex.formatHex(r.value()))
                        .append('\n');
                }
            }
        }
        System.out.print(out);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 9 && args[0].equals("run")) {
            run(args);
        } else if (args.length >= 2 && args[0].equals("drive")) {
            drive(args);
        } else {
            System.err.println("usage: Nexmark run <bootstrap> <application.id> <query> "
                + "<input prefix> <output topic> <expected inputs> <state dir> <timeout s> "
            + "[<cache bytes>]\n"
                + "       Nexmark drive <query> [<query> ...]  (records on stdin)");
            System.exit(64);
        }
    }
}
