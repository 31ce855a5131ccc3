import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import kafka.security.authorizer.AclAuthorizer;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.common.utils.SecurityUtils;
import org.apache.kafka.server.authorizer.Action;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.authorizer.AuthorizationResult;

/**
 * Kafka's own AclAuthorizer deciding requests over the ACLs in ZooKeeper, for zkcoord's differential test.
 * Arguments: zookeeper.connect, super.users. Standard input: one request a line, tab-separated principal, host,
 * operation and resource type (Java enum names) and resource name. Standard output: per request, the decision with
 * allow.everyone.if.no.acl.found=false, then with true ("0"/"1").
 */
public class AclDecisions {
    public static void main(String[] args) throws Exception {
        AclAuthorizer strict = configured(args[0], args[1], "false");
        AclAuthorizer open = configured(args[0], args[1], "true");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] fields = line.split("\t", -1);
            AuthorizableRequestContext context = context(
                SecurityUtils.parseKafkaPrincipal(fields[0]), InetAddress.getByName(fields[1]));
            ResourcePattern resource = new ResourcePattern(ResourceType.fromString(fields[3]), fields[4], PatternType.LITERAL);
            List<Action> actions = List.of(new Action(AclOperation.fromString(fields[2]), resource, 1, true, true));
            out.append(allowed(strict, context, actions)).append(allowed(open, context, actions)).append('\n');
        }
        System.out.print(out);
        strict.close();
        open.close();
    }

    private static AclAuthorizer configured(String connect, String superUsers, String allowEveryone) {
        Map<String, Object> config = new HashMap<>();
        config.put("zookeeper.connect", connect);
        config.put("super.users", superUsers);
        config.put("allow.everyone.if.no.acl.found", allowEveryone);
        AclAuthorizer authorizer = new AclAuthorizer();
        authorizer.configure(config);
        return authorizer;
    }

    private static char allowed(AclAuthorizer authorizer, AuthorizableRequestContext context, List<Action> actions) {
        return authorizer.authorize(context, actions).get(0) == AuthorizationResult.ALLOWED ? '1' : '0';
    }

    private static AuthorizableRequestContext context(KafkaPrincipal principal, InetAddress address) {
        return new AuthorizableRequestContext() {
            public String listenerName() { return "PLAINTEXT"; }
            public SecurityProtocol securityProtocol() { return SecurityProtocol.PLAINTEXT; }
            public KafkaPrincipal principal() { return principal; }
            public InetAddress clientAddress() { return address; }
            public int requestType() { return 11; }
            public int requestVersion() { return 0; }
            public String clientId() { return "zkcoord-test"; }
            public int correlationId() { return 0; }
        };
    }
}
