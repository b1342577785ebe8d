// Two benchmark clients built on Kafka's Java client (kafka-clients), for what Kafka's own tools
// cannot do without consumer groups (ConsumerPerformance and EndToEndLatency subscribe as a
// group) or do not do at all (end-to-end latency at a fixed rate). Compiled by
// bench/apache_kafka.py into .cache/kafka/<version>/classes. Both print one JSON line.
//
//   consume --bootstrap B --topic T --partitions P --records N
//       assign() every partition, seekToBeginning, poll until N records; MB/s of value bytes.
//   e2e --bootstrap B --topic T --rate R --seconds S --size BYTES --acks all|1 [--warmup S]
//       one producer thread sends R records/s (each record parked until it is due), each value carrying
//       System.nanoTime() at send; one assigned consumer (no group) reads them and records
//       nanoTime() - that stamp: same JVM, same clock. Percentiles over the records after
//       the warm-up.
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class AssignedClients {
    static Map<String, String> parse(String[] args) {
        Map<String, String> m = new HashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) m.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        return m;
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10000");
        p.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, String.valueOf(64 * 1024 * 1024));
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, String.valueOf(8 * 1024 * 1024));
        p.put(ConsumerConfig.RECEIVE_BUFFER_CONFIG, String.valueOf(1024 * 1024));
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static List<TopicPartition> partitions(KafkaConsumer<byte[], byte[]> c, String topic, int n) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < n; i++) tps.add(new TopicPartition(topic, i));
        return tps;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> o = parse(args);
        if (args[0].equals("consume")) consume(o);
        else if (args[0].equals("e2e")) e2e(o);
        else throw new IllegalArgumentException("mode: consume | e2e");
    }

    static void consume(Map<String, String> o) {
        long want = Long.parseLong(o.get("records"));
        try (KafkaConsumer<byte[], byte[]> c = consumer(o.get("bootstrap"))) {
            List<TopicPartition> tps = partitions(c, o.get("topic"), Integer.parseInt(o.getOrDefault("partitions", "1")));
            c.assign(tps);
            c.seekToBeginning(tps);
            long n = 0, bytes = 0;
            long t0 = System.nanoTime(), deadline = t0 + Duration.ofSeconds(600).toNanos();
            while (n < want && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    n++;
                    bytes += r.serializedValueSize();
                }
            }
            double s = (System.nanoTime() - t0) / 1e9;
            System.out.printf(Locale.ROOT, "{\"records\": %d, \"bytes\": %d, \"seconds\": %.3f, \"mb_s\": %.2f, \"records_s\": %.0f}%n",
                              n, bytes, s, bytes / 1e6 / s, n / s);
            if (n < want) System.exit(2);
        }
    }

    static void e2e(Map<String, String> o) throws Exception {
        String bootstrap = o.get("bootstrap"), topic = o.get("topic");
        int rate = Integer.parseInt(o.get("rate")), size = Integer.parseInt(o.getOrDefault("size", "1024"));
        double seconds = Double.parseDouble(o.get("seconds")), warmup = Double.parseDouble(o.getOrDefault("warmup", "2"));
        long total = (long) (rate * seconds), skip = (long) (rate * warmup);
        long[] lat = new long[(int) Math.max(0, total - skip)];
        KafkaConsumer<byte[], byte[]> c = consumer(bootstrap);
        List<TopicPartition> tps = partitions(c, topic, Integer.parseInt(o.getOrDefault("partitions", "1")));
        c.assign(tps);
        c.seekToEnd(tps);
        for (TopicPartition tp : tps) c.position(tp);  // resolve the end offsets before producing

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, o.getOrDefault("acks", "all"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        p.put(ProducerConfig.LINGER_MS_CONFIG, o.getOrDefault("linger-ms", "1"));
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, o.getOrDefault("batch-size", "65536"));
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
        AtomicLong errors = new AtomicLong();
        AtomicBoolean done = new AtomicBoolean();
        Thread sender = new Thread(() -> {
            byte[] template = new byte[size];
            new Random(1).nextBytes(template);
            long start = System.nanoTime();
            for (long i = 0; i < total; i++) {
                long due = start + (long) (i * 1e9 / rate);
                long now;
                // parked until due, never spinning: at 20,000+ records/s the gaps are under 200 us,
                // which the loop spun through, a core taken from the brokers on a 2-core machine
                while ((now = System.nanoTime()) < due) {
                    LockSupport.parkNanos(due - now);
                    if (Thread.interrupted()) return;
                }
                byte[] v = template.clone();
                ByteBuffer.wrap(v).putLong(0, System.nanoTime()).putLong(8, i);
                producer.send(new ProducerRecord<>(topic, (int) (i % tps.size()), null, v),
                              (md, e) -> { if (e != null) errors.incrementAndGet(); });
            }
            producer.flush();
            done.set(true);
        });
        long t0 = System.nanoTime();
        sender.start();
        long got = 0, kept = 0;
        long deadline = t0 + (long) ((seconds + 60) * 1e9);
        while (got < total && System.nanoTime() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
                long now = System.nanoTime();
                ByteBuffer b = ByteBuffer.wrap(r.value());
                long sent = b.getLong(0), seq = b.getLong(8);
                got++;
                if (seq >= skip && kept < lat.length) lat[(int) kept++] = now - sent;
            }
        }
        double wall = (System.nanoTime() - t0) / 1e9;
        sender.join(10_000);
        // the clients' own counts of the requests that carried the records: beside the client's
        // CPU, whether it worked (more, smaller requests) or waited (docs/performance.md, scenario 4)
        String requests = String.format(Locale.ROOT,
            "\"produce_requests\": %.0f, \"records_per_produce\": %.1f, \"fetches\": %.0f, \"records_per_fetch\": %.1f",
            metric(producer.metrics(), "producer-metrics", "request-total"),
            metric(producer.metrics(), "producer-metrics", "records-per-request-avg"),
            metric(c.metrics(), "consumer-fetch-manager-metrics", "fetch-total"),
            metric(c.metrics(), "consumer-fetch-manager-metrics", "records-per-request-avg"));
        producer.close(Duration.ofSeconds(10));
        c.close();
        long[] l = Arrays.copyOf(lat, (int) kept);
        Arrays.sort(l);
        System.out.printf(Locale.ROOT,
            "{\"records\": %d, \"received\": %d, \"measured\": %d, \"errors\": %d, \"rate\": %d, \"seconds\": %.2f, "
            + "\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": %.3f, \"max_ms\": %.3f, \"avg_ms\": %.3f, %s}%n",
            total, got, kept, errors.get(), rate, wall, pct(l, 0.50), pct(l, 0.99), pct(l, 0.999),
            l.length == 0 ? -1 : l[l.length - 1] / 1e6, Arrays.stream(l).average().orElse(-1e6) / 1e6, requests);
        if (got < total || errors.get() > 0) System.exit(2);
    }

    /** A client-wide metric: the one of that group and name tagged with the client id alone. */
    static double metric(Map<MetricName, ? extends Metric> metrics, String group, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : metrics.entrySet()) {
            MetricName m = e.getKey();
            if (m.group().equals(group) && m.name().equals(name) && m.tags().size() == 1)
                return ((Number) e.getValue().metricValue()).doubleValue();
        }
        return -1;
    }

    static double pct(long[] sorted, double q) {
        if (sorted.length == 0) return -1;
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(q * sorted.length) - 1)] / 1e6;
    }
}
