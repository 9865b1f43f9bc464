// Kafka Streams' side of `python -m benchmarks.restore` (issue 23, item 6): how fast Kafka
// Streams restores a persistent RocksDB key-value store from its changelog.
//
//   java -cp <kafka-streams jars, rocksdbjni included>:<classes> RestoreBench \
//        <bootstrap> <application.id> <store> <input topic> <state dir> <timeout seconds>
//
// The changelog is `<application.id>-<store>-changelog`, written beforehand by the Python
// side (the same topic aiostreams restores from). The app is a table over an empty <input
// topic>, materialized in a persistent store named <store>, so that topic is its changelog.
// Local state is deleted (KafkaStreams.cleanUp) before the start: the whole changelog is
// restored. A StateRestoreListener times the restore, from onRestoreStart to onRestoreEnd,
// and one JSON line is printed: {"records": N, "seconds": S, "records_per_s": R,
// "cpu_seconds": C} (C: the whole JVM's CPU time over the same span, every thread).
// Exit code 2 when the restore did not end within the timeout.

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

public final class RestoreBench {
    private RestoreBench() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: RestoreBench <bootstrap> <application.id> <store> "
                + "<input topic> <state dir> <timeout seconds>");
            System.exit(64);
        }
        String bootstrap = args[0];
        String appId = args[1];
        String store = args[2];
        String input = args[3];
        String stateDir = args[4];
        long timeout = Long.parseLong(args[5]);

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG),
            "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.table(input, Consumed.with(Serdes.Bytes(), Serdes.ByteArray()),
            Materialized.<Bytes, byte[]>as(Stores.persistentKeyValueStore(store))
                .withKeySerde(Serdes.Bytes()).withValueSerde(Serdes.ByteArray()));

        CountDownLatch restored = new CountDownLatch(1);
        AtomicLong started = new AtomicLong();
        AtomicLong ended = new AtomicLong();
        AtomicLong records = new AtomicLong();
        AtomicLong cpuStarted = new AtomicLong();
        AtomicLong cpuEnded = new AtomicLong();
        KafkaStreams streams = new KafkaStreams(builder.build(props), props);
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String name, long start, long end) {
                if (started.compareAndSet(0, System.nanoTime())) {
                    cpuStarted.set(processCpuNanos());
                }
            }

            @Override
            public void onBatchRestored(TopicPartition tp, String name, long batchEnd,
                                        long count) {}

            @Override
            public void onRestoreEnd(TopicPartition tp, String name, long total) {
                ended.set(System.nanoTime());
                cpuEnded.set(processCpuNanos());
                records.addAndGet(total);
                restored.countDown();
            }
        });
        streams.cleanUp(); // delete local state: restore everything from the changelog
        streams.start();
        boolean done = restored.await(timeout, TimeUnit.SECONDS);
        streams.close(Duration.ofSeconds(30));
        streams.cleanUp();
        if (!done) {
            System.err.println("RestoreBench: the restore did not end within " + timeout + " s");
            System.exit(2);
        }
        double seconds = (ended.get() - started.get()) / 1e9;
        double cpu = (cpuEnded.get() - cpuStarted.get()) / 1e9;
        System.out.printf("{\"records\": %d, \"seconds\": %.3f, \"records_per_s\": %.0f, "
            + "\"cpu_seconds\": %.3f}%n", records.get(), seconds, records.get() / seconds, cpu);
    }

    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean)
            ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }
}
