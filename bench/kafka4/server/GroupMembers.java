// One consumer group of Kafka 4.x Java consumers in one JVM, for bench/groups.py: how long a
// membership change (one member joining, one leaving) takes until every member holds its final
// share and consumes again, with the classic protocol (the Java client's default assignors, or
// --assignor cooperative-sticky) or KIP-848's (group.protocol=consumer, the broker assigns).
// Compiled by bench/apache_kafka.py against bench/kafka4/server/pom.xml's jars.
//
//   GroupMembers --bootstrap B --topic T --partitions P --group G --protocol classic|consumer
//                [--assignor default|cooperative-sticky] --members N --rounds R --rate RECORDS_S
//                [--deadline-s 300] [--quiet-s 3]
//
// A producer thread sends RECORDS_S records/s round robin over the P partitions throughout.
// Each member is a thread polling its own KafkaConsumer (poll 100 ms) and publishing, after
// every poll, its assignment and whether the poll returned records. "Settled": the members
// alive are the expected ones and their assignments cover the P partitions, disjoint, each
// holding floor(P/n) or ceil(P/n) (what range, cooperative-sticky and uniform all reach).
// "Resumed": after settling, every member has had a poll returning records. Per round a new
// member joins (t0: its thread starts), then the oldest member leaves (t0: close() is asked);
// each prints one line "GROUPS {json}" with seconds to settle and to resume, the longest pause
// of the other members' consumption and the longest pause of the whole group's in [t0, resumed].
// A change that does not settle within the deadline prints the members' holdings and exits 2.
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class GroupMembers {
    static Map<String, String> o = new HashMap<>();

    static final class Member extends Thread {
        final int id;
        final AtomicBoolean stop = new AtomicBoolean();
        volatile Set<Integer> held = Set.of();
        volatile boolean closed;
        final ConcurrentLinkedQueue<Long> fed = new ConcurrentLinkedQueue<>();  // nanoTime of polls with records
        volatile String failure;
        volatile KafkaConsumer<byte[], byte[]> consumer;

        Member(int id) { super("member-" + id); this.id = id; setDaemon(true); }

        public void run() {
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
            p.put(ConsumerConfig.GROUP_ID_CONFIG, o.get("group"));
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, "m" + id);
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, o.get("protocol"));
            if (o.getOrDefault("assignor", "default").equals("cooperative-sticky"))
                p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
            try {
                consumer = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
                consumer.subscribe(List.of(o.get("topic")));
                while (!stop.get()) {
                    try {
                        ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(100));
                        if (!got.isEmpty()) fed.add(System.nanoTime());
                    } catch (WakeupException e) {
                        continue;  // asked to leave
                    }
                    Set<Integer> now = new HashSet<>();
                    for (TopicPartition tp : consumer.assignment()) now.add(tp.partition());
                    held = Collections.unmodifiableSet(now);
                }
                held = Set.of();
                consumer.close(Duration.ofSeconds(30));
            } catch (Exception e) {
                failure = e.toString();
            } finally {
                closed = true;
            }
        }

        void leave() { stop.set(true); if (consumer != null) consumer.wakeup(); }
    }

    static final List<Member> members = new ArrayList<>();
    static final List<Member> all = new ArrayList<>();
    static int partitions, nextId;

    static void emit(String json) { System.out.println("GROUPS " + json); System.out.flush(); }

    static boolean settled(List<Member> alive) {
        int n = alive.size(), lo = partitions / n, hi = (partitions + n - 1) / n;
        Set<Integer> union = new HashSet<>();
        int total = 0;
        for (Member m : alive) {
            Set<Integer> h = m.held;
            if (m.closed || h.size() < lo || h.size() > hi) return false;
            union.addAll(h);
            total += h.size();
        }
        return total == partitions && union.size() == partitions;
    }

    static String holdings() {
        StringBuilder b = new StringBuilder("{");
        for (Member m : all) {
            if (b.length() > 1) b.append(", ");
            b.append(String.format(Locale.ROOT, "\"m%d\": {\"alive\": %b, \"closed\": %b, \"held\": %d%s}", m.id,
                     members.contains(m), m.closed, m.held.size(),
                     m.failure == null ? "" : ", \"failure\": \"" + m.failure.replace("\"", "'") + "\""));
        }
        return b.append("}").toString();
    }

    /** Wait until the group settles, then until every member has consumed since; [settle, resume] nanoTime. */
    static long[] awaitSettled(String what, long t0) throws InterruptedException {
        long deadline = t0 + (long) (Double.parseDouble(o.getOrDefault("deadline-s", "300")) * 1e9), settle = -1;
        while (System.nanoTime() < deadline) {
            long now = System.nanoTime();
            if (settle < 0 && settled(members)) settle = now;
            if (settle >= 0 && resumed(settle)) {
                long resume = settle;
                for (Member m : members) resume = Math.max(resume, firstAfter(m, settle));
                return new long[] {settle, resume};
            }
            Thread.sleep(5);
        }
        emit(String.format(Locale.ROOT, "{\"event\": \"%s\", \"error\": \"not settled after the deadline\", "
                           + "\"settled\": %b, \"members\": %d, \"holdings\": %s}", what, settle >= 0, members.size(), holdings()));
        System.exit(2);
        return null;
    }

    static boolean resumed(long settle) {
        for (Member m : members) if (firstAfter(m, settle) == Long.MAX_VALUE) return false;
        return true;
    }

    /** A member's first poll with records at or after ``since`` (MAX_VALUE: none yet). */
    static long firstAfter(Member m, long since) {
        long best = Long.MAX_VALUE;
        for (long t : m.fed) if (t >= since && t < best) best = t;
        return best;
    }

    /** Longest interval of [from, to] without a poll returning records, over the merged times. */
    static double pauseMs(Collection<Long> times, long from, long to) {
        List<Long> in = new ArrayList<>();
        for (long t : times) if (t > from && t < to) in.add(t);
        Collections.sort(in);
        long prev = from, worst = 0;
        for (long t : in) { worst = Math.max(worst, t - prev); prev = t; }
        return Math.max(worst, to - prev) / 1e6;
    }

    static void change(String what, int round, long t0, Member excluded) throws InterruptedException {
        long[] r = awaitSettled(what, t0);
        List<Long> merged = new ArrayList<>();
        double worst = 0;
        List<Double> pauses = new ArrayList<>();
        for (Member m : members) {
            if (m == excluded) continue;
            merged.addAll(m.fed);
            double p = pauseMs(m.fed, t0, r[1]);
            pauses.add(p);
            worst = Math.max(worst, p);
        }
        Collections.sort(pauses);
        emit(String.format(Locale.ROOT, "{\"event\": \"%s\", \"round\": %d, \"members\": %d, \"settled_s\": %.3f, "
                           + "\"resumed_s\": %.3f, \"member_pause_max_ms\": %.0f, \"member_pause_p50_ms\": %.0f, "
                           + "\"group_pause_ms\": %.0f}", what, round, members.size(), (r[0] - t0) / 1e9,
                           (r[1] - t0) / 1e9, worst, pauses.get(pauses.size() / 2), pauseMs(merged, t0, r[1])));
    }

    /** A quiet spell, so that the next change starts from a steady group. */
    static void quiet() throws InterruptedException {
        Thread.sleep((long) (Double.parseDouble(o.getOrDefault("quiet-s", "3")) * 1000));
    }

    static Member start() {
        Member m = new Member(nextId++);
        members.add(m);
        all.add(m);
        m.start();
        return m;
    }

    public static void main(String[] args) throws Exception {
        for (int i = 0; i + 1 < args.length; i += 2) o.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        partitions = Integer.parseInt(o.get("partitions"));
        int n = Integer.parseInt(o.get("members")), rounds = Integer.parseInt(o.get("rounds"));
        AtomicBoolean producing = new AtomicBoolean(true);
        Thread producer = new Thread(() -> produce(producing), "producer");
        producer.setDaemon(true);
        producer.start();

        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) start();
        long[] formed = awaitSettled("form", t0);
        emit(String.format(Locale.ROOT, "{\"event\": \"form\", \"members\": %d, \"settled_s\": %.3f, \"resumed_s\": %.3f}",
                           n, (formed[0] - t0) / 1e9, (formed[1] - t0) / 1e9));
        for (int round = 0; round < rounds; round++) {
            quiet();
            t0 = System.nanoTime();
            Member joined = start();
            change("join", round, t0, joined);
            quiet();
            Member oldest = members.remove(0);
            t0 = System.nanoTime();
            oldest.leave();
            change("leave", round, t0, null);
        }
        for (Member m : members) m.leave();
        for (Member m : members) m.join(40_000);
        producing.set(false);
        producer.join(10_000);
    }

    static void produce(AtomicBoolean producing) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, o.get("bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, "1");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        int rate = Integer.parseInt(o.getOrDefault("rate", "1000"));
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            long start = System.nanoTime();
            for (long i = 0; producing.get(); i++) {
                long due = start + (long) (i * 1e9 / rate);
                long wait = due - System.nanoTime();
                if (wait > 0) Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                producer.send(new ProducerRecord<>(o.get("topic"), (int) (i % partitions), null, new byte[8]));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
