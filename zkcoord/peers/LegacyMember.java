import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import kafka.consumer.Blacklist;
import kafka.consumer.Consumer;
import kafka.consumer.ConsumerConfig;
import kafka.consumer.KafkaStream;
import kafka.consumer.TopicFilter;
import kafka.consumer.Whitelist;
import kafka.javaapi.consumer.ConsumerConnector;
import kafka.message.MessageAndMetadata;

/**
 * A member of a Kafka 0.8.2 ZooKeeper consumer group written only against Kafka's public Java API, so tests
 * run the real ZookeeperConsumerConnector beside zkcoord's members (docs/peers.md).
 *
 * <pre>
 * LegacyMember CONSUMER_PROPERTIES --topics T1:STREAMS,T2:STREAMS
 * LegacyMember CONSUMER_PROPERTIES (--whitelist|--blacklist) REGEX [STREAMS]
 * </pre>
 *
 * Static subscriptions keep the order given (a LinkedHashMap): it decides round-robin hash ties. Prints
 * "started" once createMessageStreams returned (the first rebalance is done), "record TOPIC PARTITION OFFSET
 * VALUE" for each record it consumes, and "stopped" after SIGTERM's shutdown(); a first rebalance that fails
 * every retry exits with status 2.
 */
public final class LegacyMember {
    private LegacyMember() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: LegacyMember PROPERTIES --topics T:N,... | (--whitelist|--blacklist) REGEX [N]");
            System.exit(64);
        }
        final ConsumerConnector connector = Consumer.createJavaConsumerConnector(new ConsumerConfig(load(args[0])));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            connector.shutdown();
            say("stopped");
        }));
        List<KafkaStream<byte[], byte[]>> streams = new ArrayList<>();
        try {
            if (args[1].equals("--topics")) {
                for (List<KafkaStream<byte[], byte[]>> perTopic : connector.createMessageStreams(topics(args[2])).values()) {
                    streams.addAll(perTopic);
                }
            } else {
                TopicFilter filter = args[1].equals("--blacklist") ? new Blacklist(args[2]) : new Whitelist(args[2]);
                int count = args.length > 3 ? Integer.parseInt(args[3]) : 1;
                streams.addAll(connector.createMessageStreamsByFilter(filter, count));
            }
        } catch (RuntimeException failure) {
            failure.printStackTrace();
            System.exit(2);
        }
        say("started");
        List<Thread> readers = new ArrayList<>();
        for (final KafkaStream<byte[], byte[]> stream : streams) {
            Thread reader = new Thread(() -> {
                for (MessageAndMetadata<byte[], byte[]> record : stream) {
                    say("record " + record.topic() + " " + record.partition() + " " + record.offset() + " "
                            + new String(record.message(), StandardCharsets.UTF_8));
                }
            });
            reader.start();
            readers.add(reader);
        }
        for (Thread reader : readers) {
            reader.join();
        }
    }

    private static Properties load(String path) throws IOException {
        Properties properties = new Properties();
        try (InputStream input = new FileInputStream(path)) {
            properties.load(input);
        }
        return properties;
    }

    private static Map<String, Integer> topics(String spec) {
        Map<String, Integer> topics = new LinkedHashMap<>();
        for (String item : spec.split(",")) {
            String[] parts = item.split(":");
            topics.put(parts[0], parts.length > 1 ? Integer.parseInt(parts[1]) : 1);
        }
        return topics;
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
