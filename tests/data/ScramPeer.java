// Kafka's own SCRAM client, then Kafka's own SCRAM server, each for one exchange with a peer on stdin/stdout.
// Tokens travel as one base64 line each; the outcome of each exchange is one line, "<side> complete ..." or
// "<side> failed <message>". Arguments: mechanism, user, password (for the client), credential text (for the server).
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.util.Base64;
import java.util.Collections;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.CallbackHandler;
import javax.security.auth.callback.NameCallback;
import javax.security.auth.callback.PasswordCallback;
import javax.security.auth.callback.UnsupportedCallbackException;
import org.apache.kafka.common.security.scram.ScramCredential;
import org.apache.kafka.common.security.scram.ScramCredentialCallback;
import org.apache.kafka.common.security.scram.internals.ScramCredentialUtils;
import org.apache.kafka.common.security.scram.internals.ScramMechanism;
import org.apache.kafka.common.security.scram.internals.ScramSaslClient;
import org.apache.kafka.common.security.scram.internals.ScramSaslServer;

public class ScramPeer {
    private static final BufferedReader IN = new BufferedReader(new InputStreamReader(System.in));

    private static byte[] read() throws IOException {
        return Base64.getDecoder().decode(IN.readLine());
    }

    private static void write(byte[] token) {
        System.out.println(Base64.getEncoder().encodeToString(token));
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        ScramMechanism mechanism = ScramMechanism.forMechanismName(args[0]);
        String user = args[1];
        String password = args[2];
        ScramCredential credential = ScramCredentialUtils.credentialFromString(args[3]);

        CallbackHandler clientCallbacks = callbacks -> {
            for (Callback callback : callbacks) {
                if (callback instanceof NameCallback)
                    ((NameCallback) callback).setName(user);
                else if (callback instanceof PasswordCallback)
                    ((PasswordCallback) callback).setPassword(password.toCharArray());
                else
                    throw new UnsupportedCallbackException(callback);
            }
        };
        ScramSaslClient client = new ScramSaslClient(mechanism, clientCallbacks);
        try {
            write(client.evaluateChallenge(new byte[0]));
            write(client.evaluateChallenge(read()));
            client.evaluateChallenge(read());
            System.out.println("client complete " + client.isComplete());
        } catch (Exception e) {
            System.out.println("client failed " + e.getMessage());
        }
        System.out.flush();

        CallbackHandler serverCallbacks = callbacks -> {
            String name = null;
            for (Callback callback : callbacks) {
                if (callback instanceof NameCallback)
                    name = ((NameCallback) callback).getDefaultName();
                else if (callback instanceof ScramCredentialCallback)
                    ((ScramCredentialCallback) callback).scramCredential(user.equals(name) ? credential : null);
                else
                    throw new UnsupportedCallbackException(callback);
            }
        };
        ScramSaslServer server = new ScramSaslServer(mechanism, Collections.emptyMap(), serverCallbacks);
        try {
            write(server.evaluateResponse(read()));
            write(server.evaluateResponse(read()));
            System.out.println("server complete " + server.getAuthorizationID());
        } catch (Exception e) {
            System.out.println("server failed " + e.getMessage());
        }
        System.out.flush();
    }
}
